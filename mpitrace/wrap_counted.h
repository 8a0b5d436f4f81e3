/* Internal: the MPI layer's calls that carry counts, written once for their two forms: included
 * by wrap.c with N and A int and SFX(name) name (MPI_Send), and by wrap_bigcount.c with MPI_Count,
 * MPI_Aint and name##_c (MPI 4.0's MPI_Send_c). Each records its call (gr_mt_wrap.h) around the
 * next definition of the same form; both forms record the same kind, so a dump says MPI_Send for
 * either. No include guard: one inclusion per form. */

/* ---- collectives -------------------------------------------------------------------------- */

int SFX(MPI_Bcast)(void *b, N n, MPI_Datatype t, int root, MPI_Comm c) {
  RECORD(K(Bcast), c, n, t, root, -1, -1, NEXT(SFX(Bcast))(b, n, t, root, c));
}
int SFX(MPI_Reduce)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
  RECORD(K(Reduce), c, n, t, root, -1, -1, NEXT(SFX(Reduce))(s, r, n, t, op, root, c));
}
int SFX(MPI_Allreduce)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RECORD(K(Allreduce), c, n, t, -1, -1, -1, NEXT(SFX(Allreduce))(s, r, n, t, op, c));
}
int SFX(MPI_Gather)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt, int root,
                    MPI_Comm c) {
  RECORD(K(Gather), c, sn, st, root, -1, -1, NEXT(SFX(Gather))(s, sn, st, r, rn, rt, root, c));
}
int SFX(MPI_Gatherv)(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                     MPI_Datatype rt, int root, MPI_Comm c) {
  RECORD(K(Gatherv), c, sn, st, root, -1, -1, NEXT(SFX(Gatherv))(s, sn, st, r, rn, d, rt, root, c));
}
int SFX(MPI_Scatter)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt, int root,
                     MPI_Comm c) {
  RECORD(K(Scatter), c, rn, rt, root, -1, -1, NEXT(SFX(Scatter))(s, sn, st, r, rn, rt, root, c));
}
int SFX(MPI_Scatterv)(const void *s, const N sn[], const A d[], MPI_Datatype st, void *r, N rn,
                      MPI_Datatype rt, int root, MPI_Comm c) {
  RECORD(K(Scatterv), c, rn, rt, root, -1, -1,
         NEXT(SFX(Scatterv))(s, sn, d, st, r, rn, rt, root, c));
}
int SFX(MPI_Allgather)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                       MPI_Comm c) {
  RECORD(K(Allgather), c, rn, rt, -1, -1, -1, NEXT(SFX(Allgather))(s, sn, st, r, rn, rt, c));
}
int SFX(MPI_Allgatherv)(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                        MPI_Datatype rt, MPI_Comm c) {
  RECORD(K(Allgatherv), c, sn, st, -1, -1, -1, NEXT(SFX(Allgatherv))(s, sn, st, r, rn, d, rt, c));
}
int SFX(MPI_Alltoall)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                      MPI_Comm c) {
  RECORD(K(Alltoall), c, sn, st, -1, -1, -1, NEXT(SFX(Alltoall))(s, sn, st, r, rn, rt, c));
}
int SFX(MPI_Alltoallv)(const void *s, const N sn[], const A sd[], MPI_Datatype st, void *r,
                       const N rn[], const A rd[], MPI_Datatype rt, MPI_Comm c) {
  RECORD(K(Alltoallv), c, 0, st, -1, -1, -1, NEXT(SFX(Alltoallv))(s, sn, sd, st, r, rn, rd, rt, c));
}
int SFX(MPI_Alltoallw)(const void *s, const N sn[], const A sd[], const MPI_Datatype st[], void *r,
                       const N rn[], const A rd[], const MPI_Datatype rt[], MPI_Comm c) {
  RECORD(K(Alltoallw), c, 0, MPI_DATATYPE_NULL, -1, -1, -1,
         NEXT(SFX(Alltoallw))(s, sn, sd, st, r, rn, rd, rt, c));
}
int SFX(MPI_Reduce_scatter)(const void *s, void *r, const N rn[], MPI_Datatype t, MPI_Op op,
                            MPI_Comm c) {
  RECORD(K(Reduce_scatter), c, 0, t, -1, -1, -1, NEXT(SFX(Reduce_scatter))(s, r, rn, t, op, c));
}
int SFX(MPI_Reduce_scatter_block)(const void *s, void *r, N rn, MPI_Datatype t, MPI_Op op,
                                  MPI_Comm c) {
  RECORD(K(Reduce_scatter_block), c, rn, t, -1, -1, -1,
         NEXT(SFX(Reduce_scatter_block))(s, r, rn, t, op, c));
}
int SFX(MPI_Scan)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RECORD(K(Scan), c, n, t, -1, -1, -1, NEXT(SFX(Scan))(s, r, n, t, op, c));
}
int SFX(MPI_Exscan)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RECORD(K(Exscan), c, n, t, -1, -1, -1, NEXT(SFX(Exscan))(s, r, n, t, op, c));
}

int SFX(MPI_Ibcast)(void *b, N n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q) {
  START(K(Ibcast), c, n, t, root, -1, -1, NEXT(SFX(Ibcast))(b, n, t, root, c, q), q);
}
int SFX(MPI_Ireduce)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c,
                     MPI_Request *q) {
  START(K(Ireduce), c, n, t, root, -1, -1, NEXT(SFX(Ireduce))(s, r, n, t, op, root, c, q), q);
}
int SFX(MPI_Iallreduce)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                        MPI_Request *q) {
  START(K(Iallreduce), c, n, t, -1, -1, -1, NEXT(SFX(Iallreduce))(s, r, n, t, op, c, q), q);
}
int SFX(MPI_Igather)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt, int root,
                     MPI_Comm c, MPI_Request *q) {
  START(K(Igather), c, sn, st, root, -1, -1, NEXT(SFX(Igather))(s, sn, st, r, rn, rt, root, c, q),
        q);
}
int SFX(MPI_Igatherv)(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                      MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *q) {
  START(K(Igatherv), c, sn, st, root, -1, -1,
        NEXT(SFX(Igatherv))(s, sn, st, r, rn, d, rt, root, c, q), q);
}
int SFX(MPI_Iscatter)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                      int root, MPI_Comm c, MPI_Request *q) {
  START(K(Iscatter), c, rn, rt, root, -1, -1, NEXT(SFX(Iscatter))(s, sn, st, r, rn, rt, root, c, q),
        q);
}
int SFX(MPI_Iscatterv)(const void *s, const N sn[], const A d[], MPI_Datatype st, void *r, N rn,
                       MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *q) {
  START(K(Iscatterv), c, rn, rt, root, -1, -1,
        NEXT(SFX(Iscatterv))(s, sn, d, st, r, rn, rt, root, c, q), q);
}
int SFX(MPI_Iallgather)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                        MPI_Comm c, MPI_Request *q) {
  START(K(Iallgather), c, rn, rt, -1, -1, -1, NEXT(SFX(Iallgather))(s, sn, st, r, rn, rt, c, q), q);
}
int SFX(MPI_Iallgatherv)(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                         MPI_Datatype rt, MPI_Comm c, MPI_Request *q) {
  START(K(Iallgatherv), c, sn, st, -1, -1, -1,
        NEXT(SFX(Iallgatherv))(s, sn, st, r, rn, d, rt, c, q), q);
}
int SFX(MPI_Ialltoall)(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                       MPI_Comm c, MPI_Request *q) {
  START(K(Ialltoall), c, sn, st, -1, -1, -1, NEXT(SFX(Ialltoall))(s, sn, st, r, rn, rt, c, q), q);
}
int SFX(MPI_Ialltoallv)(const void *s, const N sn[], const A sd[], MPI_Datatype st, void *r,
                        const N rn[], const A rd[], MPI_Datatype rt, MPI_Comm c, MPI_Request *q) {
  START(K(Ialltoallv), c, 0, st, -1, -1, -1,
        NEXT(SFX(Ialltoallv))(s, sn, sd, st, r, rn, rd, rt, c, q), q);
}
int SFX(MPI_Ialltoallw)(const void *s, const N sn[], const A sd[], const MPI_Datatype st[], void *r,
                        const N rn[], const A rd[], const MPI_Datatype rt[], MPI_Comm c,
                        MPI_Request *q) {
  START(K(Ialltoallw), c, 0, MPI_DATATYPE_NULL, -1, -1, -1,
        NEXT(SFX(Ialltoallw))(s, sn, sd, st, r, rn, rd, rt, c, q), q);
}
int SFX(MPI_Ireduce_scatter)(const void *s, void *r, const N rn[], MPI_Datatype t, MPI_Op op,
                             MPI_Comm c, MPI_Request *q) {
  START(K(Ireduce_scatter), c, 0, t, -1, -1, -1, NEXT(SFX(Ireduce_scatter))(s, r, rn, t, op, c, q),
        q);
}
int SFX(MPI_Ireduce_scatter_block)(const void *s, void *r, N rn, MPI_Datatype t, MPI_Op op,
                                   MPI_Comm c, MPI_Request *q) {
  START(K(Ireduce_scatter_block), c, rn, t, -1, -1, -1,
        NEXT(SFX(Ireduce_scatter_block))(s, r, rn, t, op, c, q), q);
}
int SFX(MPI_Iscan)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                   MPI_Request *q) {
  START(K(Iscan), c, n, t, -1, -1, -1, NEXT(SFX(Iscan))(s, r, n, t, op, c, q), q);
}
int SFX(MPI_Iexscan)(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                     MPI_Request *q) {
  START(K(Iexscan), c, n, t, -1, -1, -1, NEXT(SFX(Iexscan))(s, r, n, t, op, c, q), q);
}

/* ---- point to point ----------------------------------------------------------------------- */

int SFX(MPI_Send)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Send), c, n, t, -1, dest, tag, NEXT(SFX(Send))(b, n, t, dest, tag, c));
}
int SFX(MPI_Ssend)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Ssend), c, n, t, -1, dest, tag, NEXT(SFX(Ssend))(b, n, t, dest, tag, c));
}
int SFX(MPI_Bsend)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Bsend), c, n, t, -1, dest, tag, NEXT(SFX(Bsend))(b, n, t, dest, tag, c));
}
int SFX(MPI_Rsend)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Rsend), c, n, t, -1, dest, tag, NEXT(SFX(Rsend))(b, n, t, dest, tag, c));
}
int SFX(MPI_Recv)(void *b, N n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *st) {
  RECORD(K(Recv), c, n, t, -1, src, tag, NEXT(SFX(Recv))(b, n, t, src, tag, c, st));
}
int SFX(MPI_Sendrecv)(const void *sb, N sn, MPI_Datatype st, int dest, int stag, void *rb, N rn,
                      MPI_Datatype rt, int src, int rtag, MPI_Comm c, MPI_Status *s) {
  RECORD(K(Sendrecv), c, rn, rt, -1, src, rtag,
         NEXT(SFX(Sendrecv))(sb, sn, st, dest, stag, rb, rn, rt, src, rtag, c, s));
}
int SFX(MPI_Sendrecv_replace)(void *b, N n, MPI_Datatype t, int dest, int stag, int src, int rtag,
                              MPI_Comm c, MPI_Status *s) {
  RECORD(K(Sendrecv_replace), c, n, t, -1, src, rtag,
         NEXT(SFX(Sendrecv_replace))(b, n, t, dest, stag, src, rtag, c, s));
}
int SFX(MPI_Mrecv)(void *b, N n, MPI_Datatype t, MPI_Message *m, MPI_Status *s) {
  RECORD(K(Mrecv), MPI_COMM_NULL, n, t, -1, -1, -1, NEXT(SFX(Mrecv))(b, n, t, m, s));
}

int SFX(MPI_Isend)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c,
                   MPI_Request *q) {
  START(K(Isend), c, n, t, -1, dest, tag, NEXT(SFX(Isend))(b, n, t, dest, tag, c, q), q);
}
int SFX(MPI_Issend)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c,
                    MPI_Request *q) {
  START(K(Issend), c, n, t, -1, dest, tag, NEXT(SFX(Issend))(b, n, t, dest, tag, c, q), q);
}
int SFX(MPI_Ibsend)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c,
                    MPI_Request *q) {
  START(K(Ibsend), c, n, t, -1, dest, tag, NEXT(SFX(Ibsend))(b, n, t, dest, tag, c, q), q);
}
int SFX(MPI_Irsend)(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c,
                    MPI_Request *q) {
  START(K(Irsend), c, n, t, -1, dest, tag, NEXT(SFX(Irsend))(b, n, t, dest, tag, c, q), q);
}
int SFX(MPI_Irecv)(void *b, N n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *q) {
  START(K(Irecv), c, n, t, -1, src, tag, NEXT(SFX(Irecv))(b, n, t, src, tag, c, q), q);
}
