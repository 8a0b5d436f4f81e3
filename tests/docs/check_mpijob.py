#!/usr/bin/python3
"""Check the guide's MPIJob against the MPI Operator's v2beta1 rules, then check that the same
rules reject broken variants of it (so the check can fail).

usage: check_mpijob.py RULES.json MPIJOB.yaml

RULES.json (tests/docs/data/mpijob-v2beta1-rules.json) says where its rules come from. Schema
keywords understood: type, format (int32/int64 ranges), enum, required, properties, known (the
field names an object may have), additionalProperties, items, minItems, minimum, pattern,
int-or-string, $ref (a name in "defs"), replicasExactly (the replicas of that replica spec), and
dns1035WorkerName (the operator's rule on metadata.name). On top, gpurun's own rules for the job:
every Worker container asks for nvidia.com/gpu equal to slotsPerWorker (one rank per GPU), and
the Launcher runs `mpirun -np N ... gpurun PROGRAM` with N = Worker replicas x slotsPerWorker.
Exit 0 when the job passes and every broken variant fails; 77 when PyYAML is missing.
"""
import copy
import json
import re
import sys

try:
    import yaml
except ImportError:
    print("SKIP: PyYAML (python3-yaml) is not installed")
    sys.exit(77)

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}
RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def check(node, value, path, defs, errs, doc):
    if "$ref" in node:
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = dict(defs[node["$ref"]], **extra)
    t = node.get("type")
    if node.get("int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errs.append(f"{path}: expected an integer or a string, got {type(value).__name__}")
            return
        if isinstance(value, str) and "pattern" in node and not re.match(node["pattern"], value):
            errs.append(f"{path}: '{value}' is not a resource quantity")
        return
    if t == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            errs.append(f"{path}: expected an integer, got {type(value).__name__} {value!r}")
            return
        lo, hi = RANGES.get(node.get("format"), (None, None))
        if lo is not None and not lo <= value <= hi:
            errs.append(f"{path}: {value} is out of the {node['format']} range")
        if "minimum" in node and value < node["minimum"]:
            errs.append(f"{path}: {value} is below the minimum {node['minimum']}")
    elif t is not None:
        if not isinstance(value, TYPES[t]) or (t != "boolean" and isinstance(value, bool)):
            errs.append(f"{path}: expected {t}, got {type(value).__name__} {value!r}")
            return
    if "enum" in node and value not in node["enum"]:
        errs.append(f"{path}: '{value}' is not one of {node['enum']}")
    if node.get("dns1035WorkerName"):
        workers = doc.get("spec", {}).get("mpiReplicaSpecs", {}).get("Worker", {}).get("replicas", 1)
        workers = workers if isinstance(workers, int) and not isinstance(workers, bool) else 1
        host = f"{value}-worker-{max(workers, 1) - 1}"
        if len(host) > 63 or not DNS1035.match(host):
            errs.append(f"{path}: pod name '{host}' is not a DNS-1035 label")
    if isinstance(value, dict):
        for k in node.get("required", []):
            if k not in value:
                errs.append(f"{path}: '{k}' is required")
        if "known" in node:
            for k in value:
                if k not in node["known"]:
                    errs.append(f"{path}: unknown field '{k}' (the API server would drop it)")
        for k, v in value.items():
            if k in node.get("properties", {}):
                check(node["properties"][k], v, f"{path}.{k}", defs, errs, doc)
            elif "additionalProperties" in node:
                check(node["additionalProperties"], v, f"{path}.{k}", defs, errs, doc)
        if "replicasExactly" in node and value.get("replicas", node["replicasExactly"]) != node["replicasExactly"]:
            errs.append(f"{path}.replicas: must be {node['replicasExactly']}")
    if isinstance(value, list):
        if len(value) < node.get("minItems", 0):
            errs.append(f"{path}: needs at least {node['minItems']} item(s)")
        for i, v in enumerate(value):
            if "items" in node:
                check(node["items"], v, f"{path}[{i}]", defs, errs, doc)


def gpurun_rules(doc, errs):
    spec = doc.get("spec", {})
    slots = spec.get("slotsPerWorker", 1)
    reps = spec.get("mpiReplicaSpecs", {})
    workers = reps.get("Worker", {}).get("replicas", 0)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (slots, workers)):
        return  # the schema check has said what is wrong with them
    for i, c in enumerate(reps.get("Worker", {}).get("template", {}).get("spec", {}).get("containers", [])):
        gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if str(gpus) != str(slots):
            errs.append(f"Worker container {i}: limits nvidia.com/gpu is {gpus!r}, "
                        f"slotsPerWorker {slots}: one rank per GPU needs them equal")
    lc = reps.get("Launcher", {}).get("template", {}).get("spec", {}).get("containers", [{}])
    argv = list(lc[0].get("command", [])) + list(lc[0].get("args", [])) if lc else []
    if not argv or argv[0] != "mpirun":
        errs.append(f"Launcher: the command is not mpirun: {argv}")
        return
    if "-np" not in argv or argv.index("-np") + 1 >= len(argv):
        errs.append("Launcher: mpirun has no -np")
    elif argv[argv.index("-np") + 1] != str(workers * slots):
        errs.append(f"Launcher: mpirun -np {argv[argv.index('-np') + 1]}, but {workers} workers x "
                    f"{slots} slots = {workers * slots} ranks")
    if "gpurun" not in [a.rsplit("/", 1)[-1] for a in argv[1:]]:
        errs.append("Launcher: the ranks are not started through gpurun")


def validate(rules, doc):
    errs = []
    check(rules["root"], doc, "MPIJob", rules["defs"], errs, doc)
    gpurun_rules(doc, errs)
    return errs


def main():
    rules = json.load(open(sys.argv[1]))
    text = open(sys.argv[2]).read()
    doc = yaml.safe_load(text)
    errs = validate(rules, doc)
    for e in errs:
        print("FAIL:", e)
    if errs:
        return 1
    print(f"ok   {sys.argv[2]}: a valid kubeflow.org/v2beta1 MPIJob for gpurun")

    def w(d):
        return d["spec"]["mpiReplicaSpecs"]["Worker"]

    def lc(d):
        return d["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]

    broken = [
        ("the API version", lambda d: d.__setitem__("apiVersion", "kubeflow.org/v1")),
        ("no Launcher", lambda d: d["spec"]["mpiReplicaSpecs"].pop("Launcher")),
        ("2 launchers", lambda d: d["spec"]["mpiReplicaSpecs"]["Launcher"].__setitem__("replicas", 2)),
        ("0 workers", lambda d: w(d).__setitem__("replicas", 0)),
        ("replicas as a string", lambda d: w(d).__setitem__("replicas", "2")),
        ("restartPolicy Always", lambda d: w(d).__setitem__("restartPolicy", "Always")),
        ("cleanPodPolicy Some", lambda d: d["spec"]["runPolicy"].__setitem__("cleanPodPolicy", "Some")),
        ("mpiImplementation openmpi", lambda d: d["spec"].__setitem__("mpiImplementation", "openmpi")),
        ("a container without a name", lambda d: lc(d).pop("name")),
        ("no containers", lambda d: w(d)["template"]["spec"].__setitem__("containers", [])),
        ("a misspelt field", lambda d: d["spec"].__setitem__("slotPerWorker", 2)),
        ("a misspelt container field", lambda d: lc(d).__setitem__("comand", ["mpirun"])),
        ("a GPU count that is no quantity", lambda d: w(d)["template"]["spec"]["containers"][0]
         ["resources"]["limits"].__setitem__("nvidia.com/gpu", "two")),
        ("an env entry without a name", lambda d: lc(d)["env"].append({"value": "1"})),
        ("slotsPerWorker past int32", lambda d: d["spec"].__setitem__("slotsPerWorker", 2**31)),
        ("a name that is no DNS label", lambda d: d["metadata"].__setitem__("name", "GPUrun_sim")),
        ("GPUs and slots differ", lambda d: d["spec"].__setitem__("slotsPerWorker", 4)),
        ("-np that does not match", lambda d: lc(d)["args"].__setitem__(1, "8")),
        ("ranks not through gpurun", lambda d: lc(d)["args"].remove("gpurun")),
    ]
    bad = 0
    for what, mutate in broken:
        d = copy.deepcopy(doc)
        mutate(d)
        e = validate(rules, d)
        print(("ok   rejected: " if e else "FAIL accepted: ") + what + (f" ({e[0]})" if e else ""))
        bad += not e
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
