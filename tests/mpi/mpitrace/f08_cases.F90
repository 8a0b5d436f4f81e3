! `use mpi_f08` calls of every kind the MPI layer records (test_mpitrace.sh runs it plain and
! under --trace=mpi and compares the output): collectives blocking and not, with and without the
! optional ierror, large counts; point to point; waits and tests of each form, MPI_STATUS_IGNORE
! and MPI_STATUSES_IGNORE; probes; communicator and window creation, a name; one-sided
! synchronisation. Every result is checked against what it must be (a rank prints what failed);
! the last line counts them. Few enough calls that the flight recorder keeps all of them.
! With -DGR_LARGE_COUNT (MPI 4's large-count forms: MPICH 4, not Open MPI 4.1) some counts are
! INTEGER(MPI_COUNT_KIND).
#ifdef GR_LARGE_COUNT
#define COUNT_KIND MPI_COUNT_KIND
#else
#define COUNT_KIND kind(1)
#endif
program f08_cases
  use mpi_f08
  use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
  implicit none
  integer :: ierr, rank, nr, i, j, prov, idx, outn, nfail, nchk, v, peer
  integer :: cnt(64), dsp(64), idxs(4), dims(2)
  integer(kind=COUNT_KIND) :: lc
  integer(kind=MPI_ADDRESS_KIND) :: wsize
  logical :: flag, per(2), remain(2), p2p
  type(MPI_Comm) :: dup, half, node, cart, row
  type(MPI_Request) :: q, qs(4)
  type(MPI_Status) :: st, sts(4)
  type(MPI_Datatype) :: types(64)
  type(MPI_Message) :: msg
  type(MPI_Group) :: wg, g
  type(MPI_Win) :: win
  type(c_ptr) :: base
  double precision :: x(64), y(64), z
  integer, pointer :: wbuf(:)
  character(len=MPI_MAX_OBJECT_NAME) :: name
  integer :: namelen

  nfail = 0
  nchk = 0
  call MPI_Init_thread(MPI_THREAD_SINGLE, prov, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nr)
  peer = mod(rank + 1, nr)

  ! ---- collectives ----
  x = rank + 1
  call MPI_Barrier(MPI_COMM_WORLD)
  z = 0
  if (rank == 0) z = 42
  call MPI_Bcast(z, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call check('bcast', z == 42 .and. ierr == MPI_SUCCESS)
  lc = 2
  y = 0
  call MPI_Allreduce(x, y, lc, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call check('allreduce large', y(1) == nr * (nr + 1) / 2 .and. y(3) == 0)
  y = 0
  call MPI_Reduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_MAX, nr - 1, MPI_COMM_WORLD, ierr)
  call check('reduce', (rank /= nr - 1 .and. y(1) == 0) .or. y(1) == nr)
  y = 0
  call MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('allreduce in place', x(1) == nr * (nr + 1) / 2)
  x = rank
  call MPI_Gather(x, 1, MPI_DOUBLE_PRECISION, y, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call check('gather', rank /= 0 .or. y(nr) == nr - 1)
  cnt = 1
  dsp = [(i - 1, i = 1, 64)]
  call MPI_Gatherv(x, 1, MPI_DOUBLE_PRECISION, y, cnt, dsp, MPI_DOUBLE_PRECISION, 0, &
                   MPI_COMM_WORLD, ierr)
  call check('gatherv', rank /= 0 .or. y(2) == 1)
  y = [(i, i = 1, 64)]
  call MPI_Scatter(y, 1, MPI_DOUBLE_PRECISION, z, 1, MPI_DOUBLE_PRECISION, 1, MPI_COMM_WORLD, ierr)
  call check('scatter', z == rank + 1)
  call MPI_Scatterv(y, cnt, dsp, MPI_DOUBLE_PRECISION, z, 1, MPI_DOUBLE_PRECISION, 0, &
                    MPI_COMM_WORLD, ierr)
  call check('scatterv', z == rank + 1)
  call MPI_Allgather(x, 1, MPI_DOUBLE_PRECISION, y, 1, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call check('allgather', y(nr) == nr - 1)
  call MPI_Allgatherv(x, 1, MPI_DOUBLE_PRECISION, y, cnt, dsp, MPI_DOUBLE_PRECISION, &
                      MPI_COMM_WORLD, ierr)
  call check('allgatherv', y(2) == 1)
  x = [(rank * 100 + i, i = 1, 64)]
  call MPI_Alltoall(x, 1, MPI_DOUBLE_PRECISION, y, 1, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call check('alltoall', y(nr) == (nr - 1) * 100 + rank + 1)
  call MPI_Alltoallv(x, cnt, dsp, MPI_DOUBLE_PRECISION, y, cnt, dsp, MPI_DOUBLE_PRECISION, &
                     MPI_COMM_WORLD, ierr)
  call check('alltoallv', y(1) == rank + 1)
  types = MPI_DOUBLE_PRECISION
  dsp = [(8 * (i - 1), i = 1, 64)]
  call MPI_Alltoallw(x, cnt, dsp, types, y, cnt, dsp, types, MPI_COMM_WORLD, ierr)
  call check('alltoallw', y(2) == 100 + rank + 1)
  dsp = [(i - 1, i = 1, 64)]
  x = 1
  call MPI_Reduce_scatter(x, z, cnt, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('reduce_scatter', z == nr)
  call MPI_Reduce_scatter_block(x, z, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('reduce_scatter_block', z == nr)
  call MPI_Scan(x, z, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('scan', z == rank + 1)
  z = -1
  call MPI_Exscan(x, z, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('exscan', rank == 0 .or. z == rank)

  ! ---- non-blocking collectives, the wait forms ----
  call MPI_Ibarrier(MPI_COMM_WORLD, q, ierr)
  call MPI_Wait(q, st, ierr)
  call check('ibarrier wait', ierr == MPI_SUCCESS .and. q == MPI_REQUEST_NULL)
  x = rank + 1
  call MPI_Iallreduce(x, y, 2, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, qs(1), ierr)
  z = 0
  if (rank == 0) z = 7
  call MPI_Ibcast(z, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, qs(2), ierr)
  call MPI_Waitall(2, qs, MPI_STATUSES_IGNORE, ierr)
  call check('iallreduce ibcast waitall', y(2) == nr * (nr + 1) / 2 .and. z == 7)
  call MPI_Iallgather(x, 1, MPI_DOUBLE_PRECISION, y, 1, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, q)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(q, flag, MPI_STATUS_IGNORE, ierr)
  end do
  call check('iallgather test', y(nr) == nr)

  ! ---- point to point: a ring, each wait and test form ----
  x = rank
  call MPI_Sendrecv(x, 1, MPI_DOUBLE_PRECISION, peer, 1, z, 1, MPI_DOUBLE_PRECISION, &
                    MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, st, ierr)
  call check('sendrecv', z == mod(rank + nr - 1, nr) .and. st%MPI_SOURCE == mod(rank + nr - 1, nr))
  z = rank
  call MPI_Sendrecv_replace(z, 1, MPI_DOUBLE_PRECISION, peer, 2, MPI_ANY_SOURCE, 2, &
                            MPI_COMM_WORLD, st, ierr)
  call check('sendrecv_replace', z == mod(rank + nr - 1, nr))
  p2p = .true.
  if (rank == 0) then
    call MPI_Send(x, 1, MPI_DOUBLE_PRECISION, 1, 3, MPI_COMM_WORLD, ierr)
    lc = 1
    call MPI_Ssend(x, lc, MPI_DOUBLE_PRECISION, 1, 4, MPI_COMM_WORLD)
    call MPI_Send(x, 1, MPI_DOUBLE_PRECISION, 1, 5, MPI_COMM_WORLD, ierr)
    call MPI_Send(x, 1, MPI_DOUBLE_PRECISION, 1, 6, MPI_COMM_WORLD, ierr)
  else if (rank == 1) then
    call MPI_Recv(z, 1, MPI_DOUBLE_PRECISION, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    p2p = z == 0
    call MPI_Probe(0, 4, MPI_COMM_WORLD, st, ierr)
    p2p = p2p .and. st%MPI_TAG == 4
    lc = 1
    call MPI_Recv(z, lc, MPI_DOUBLE_PRECISION, 0, 4, MPI_COMM_WORLD, st)
    call MPI_Mprobe(0, 5, MPI_COMM_WORLD, msg, st, ierr)
    call MPI_Mrecv(z, 1, MPI_DOUBLE_PRECISION, msg, st, ierr)
    p2p = p2p .and. st%MPI_TAG == 5
    call MPI_Irecv(z, 1, MPI_DOUBLE_PRECISION, 0, 6, MPI_COMM_WORLD, qs(1), ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Testall(1, qs, flag, MPI_STATUSES_IGNORE, ierr)
    end do
    p2p = p2p .and. qs(1) == MPI_REQUEST_NULL
  end if
  call check('send ssend recv probe mprobe mrecv irecv testall', p2p)
  do j = 1, 2
    call MPI_Irecv(y(j), 1, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 10 + j, MPI_COMM_WORLD, &
                   qs(j), ierr)
  end do
  x(1) = rank
  call MPI_Isend(x, 1, MPI_DOUBLE_PRECISION, peer, 11, MPI_COMM_WORLD, qs(3), ierr)
  call MPI_Issend(x, 1, MPI_DOUBLE_PRECISION, peer, 12, MPI_COMM_WORLD, qs(4), ierr)
  v = 0
  do while (v < 4)
    call MPI_Waitsome(4, qs, outn, idxs, sts, ierr)
    if (outn == MPI_UNDEFINED) exit
    v = v + outn
  end do
  call check('isend issend irecv waitsome', v == 4 .and. y(1) == y(2) .and. &
             y(1) == mod(rank + nr - 1, nr))
  call MPI_Irecv(y, 1, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 13, MPI_COMM_WORLD, qs(1), ierr)
  call MPI_Isend(x, 1, MPI_DOUBLE_PRECISION, peer, 13, MPI_COMM_WORLD, qs(2), ierr)
  do j = 1, 2
    call MPI_Waitany(2, qs, idx, st, ierr)
  end do
  call MPI_Waitany(2, qs, idx, st, ierr)
  call check('waitany', idx == MPI_UNDEFINED .and. y(1) == mod(rank + nr - 1, nr))
  call MPI_Irecv(y, 1, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 14, MPI_COMM_WORLD, qs(1), ierr)
  call MPI_Isend(x, 1, MPI_DOUBLE_PRECISION, peer, 14, MPI_COMM_WORLD, qs(2), ierr)
  v = 0
  do while (v < 2)
    call MPI_Testany(2, qs, idx, flag, st, ierr)
    if (flag .and. idx /= MPI_UNDEFINED) v = v + 1
  end do
  v = 0
  do while (v == 0)
    call MPI_Testsome(2, qs, outn, idxs, sts, ierr)
    if (outn == MPI_UNDEFINED) v = 1
  end do
  call check('testany testsome', qs(1) == MPI_REQUEST_NULL .and. qs(2) == MPI_REQUEST_NULL)

  ! ---- communicators ----
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_set_name(dup, 'f08dup   ', ierr)
  call MPI_Comm_get_name(dup, name, namelen, ierr)
  call check('dup, named', name(1:namelen) == 'f08dup')
  call MPI_Comm_split(dup, mod(rank, 2), rank, half, ierr)
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, node, ierr)
  call MPI_Comm_group(MPI_COMM_WORLD, wg, ierr)
  call MPI_Group_incl(wg, 2, [0, 1], g, ierr)
  call MPI_Comm_create(MPI_COMM_WORLD, g, row, ierr)
  call check('create', (rank < 2) .neqv. (row == MPI_COMM_NULL))
  if (row /= MPI_COMM_NULL) call MPI_Comm_free(row, ierr)
  dims = [nr, 1]
  per = .false.
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, per, .false., cart, ierr)
  remain = [.true., .false.]
  call MPI_Cart_sub(cart, remain, row, ierr)
  call MPI_Comm_size(row, v, ierr)
  call check('cart_create cart_sub', v == nr)
  z = 1
  call MPI_Allreduce(MPI_IN_PLACE, z, 1, MPI_DOUBLE_PRECISION, MPI_SUM, half, ierr)
  call check('split', z == (nr + 1 - mod(rank, 2)) / 2)

  ! ---- windows ----
  wsize = 4 * nr
  call MPI_Win_allocate(wsize, 4, MPI_INFO_NULL, node, base, win, ierr)
  call c_f_pointer(base, wbuf, [nr])
  wbuf = -1
  call MPI_Win_fence(0, win, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win, ierr)
  call MPI_Win_unlock(0, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Win_free(win, ierr)
  call check('win_allocate fence lock unlock', ierr == MPI_SUCCESS)

  call MPI_Group_free(g, ierr)
  call MPI_Group_free(wg, ierr)
  call MPI_Comm_free(row, ierr)
  call MPI_Comm_free(cart, ierr)
  call MPI_Comm_free(node, ierr)
  call MPI_Comm_free(half, ierr)
  call MPI_Comm_free(dup, ierr)
  call MPI_Reduce(nfail, v, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a,i0,a)', 'f08: ', nchk, ' checks on each rank, ', v, ' failed'
  call MPI_Finalize(ierr)

contains

  subroutine check(what, ok)
    character(len=*), intent(in) :: what
    logical, intent(in) :: ok
    nchk = nchk + 1
    if (.not. ok) then
      nfail = nfail + 1
      print '(a,i0,a,a,a)', 'f08: rank ', rank, ': ', what, ' failed'
    end if
  end subroutine check
end program f08_cases
