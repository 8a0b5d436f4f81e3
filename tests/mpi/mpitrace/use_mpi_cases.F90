! `use mpi` calls (mpif.h's bindings) of the kinds the MPI layer ends or records besides the
! common ones: each wait and test form on its own ring of requests, a window's passive and
! general active synchronisation, graph and distributed graph creation, a name. test_mpitrace.sh
! runs it plain and under --trace=mpi, compares the output, and checks that each rank's flight
! recorder holds every kind and no record is left running. Under Open MPI the calls reach
! mpitrace/fortran.c as mpi_<name>_ (where mpi_f08 reaches some of them as pmpi_<name>_, which
! f08_cases.F90 covers), under MPICH the C functions of wrap.c.
program use_mpi_cases
  use mpi
  use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
  implicit none
  integer :: ierr, rank, nr, peer, prev, i, v, idx, outn, nfail, tot, win, wg, g, graph, dg, dga
  integer :: dup, nlen, node, nrank, nn, ranks(64)
  integer :: qs(2), idxs(2), sts(MPI_STATUS_SIZE, 2), st(MPI_STATUS_SIZE)
  integer :: gindex(64), gedges(64), srcs(1), dsts(1), degs(1), me(1)
  integer(kind=MPI_ADDRESS_KIND) :: wsize, disp, baseptr
  type(c_ptr) :: cp
  logical :: flag
  double precision :: x, y(2)
  double precision, pointer :: wbuf(:)
  character(len=MPI_MAX_OBJECT_NAME) :: name

  nfail = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nr, ierr)
  peer = mod(rank + 1, nr)
  prev = mod(rank + nr - 1, nr)
  x = rank

  ! ---- completion: every form ends the records of the requests it completes ----
  call ring(21)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(qs(1), flag, st, ierr)
  end do
  flag = .false.
  do while (.not. flag)
    call MPI_Test(qs(2), flag, MPI_STATUS_IGNORE, ierr)
  end do
  call check('test', y(1) == prev .and. st(MPI_SOURCE) == prev)
  call ring(22)
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(2, qs, flag, sts, ierr)
  end do
  call check('testall', y(1) == prev .and. qs(2) == MPI_REQUEST_NULL)
  call ring(23)
  v = 0
  do while (v < 2)
    call MPI_Testany(2, qs, idx, flag, st, ierr)
    if (flag .and. idx /= MPI_UNDEFINED) v = v + 1
  end do
  call check('testany', y(1) == prev .and. qs(1) == MPI_REQUEST_NULL .and. qs(2) == MPI_REQUEST_NULL)
  call ring(24)
  v = 0
  do while (v < 2)
    call MPI_Testsome(2, qs, outn, idxs, MPI_STATUSES_IGNORE, ierr)
    if (outn == MPI_UNDEFINED) exit
    v = v + outn
  end do
  call check('testsome', v == 2 .and. y(1) == prev)
  call ring(25)
  call MPI_Waitany(2, qs, idx, st, ierr)
  call MPI_Waitany(2, qs, idx, MPI_STATUS_IGNORE, ierr)
  call check('waitany', y(1) == prev .and. qs(1) == MPI_REQUEST_NULL .and. qs(2) == MPI_REQUEST_NULL)
  call ring(26)
  v = 0
  do while (v < 2)
    call MPI_Waitsome(2, qs, outn, idxs, sts, ierr)
    v = v + outn
  end do
  call check('waitsome', y(1) == prev)

  ! ---- a window: passive target, then general active target (post, start, complete, wait) ----
  ! (MPI_Win_allocate on the node's ranks: Open MPI's osc sm serves it whatever the BTLs; its
  ! MPI_Win_create needs RDMA the test's vader settings do not give)
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, node, ierr)
  call MPI_Comm_rank(node, nrank, ierr)
  call MPI_Comm_size(node, nn, ierr)
  wsize = 8 * 64
  call MPI_Win_allocate(wsize, 8, MPI_INFO_NULL, node, baseptr, win, ierr)
  call c_f_pointer(transfer(baseptr, cp), wbuf, [64])
  wbuf = -1
  call MPI_Win_lock_all(0, win, ierr)
  call MPI_Win_flush(mod(nrank + 1, nn), win, ierr)
  call MPI_Win_flush_all(win, ierr)
  call MPI_Win_unlock_all(win, ierr)
  call MPI_Comm_group(node, wg, ierr)
  me(1) = nrank
  call MPI_Group_excl(wg, 1, me, g, ierr)
  call MPI_Win_post(g, 0, win, ierr)
  call MPI_Win_start(g, 0, win, ierr)
  disp = nrank
  if (nn > 1) call MPI_Put(x, 1, MPI_DOUBLE_PRECISION, mod(nrank + 1, nn), disp, 1, &
                           MPI_DOUBLE_PRECISION, win, ierr)
  call MPI_Win_complete(win, ierr)
  call MPI_Win_wait(win, ierr)
  i = mod(nrank + nn - 1, nn)
  call MPI_Allgather(rank, 1, MPI_INTEGER, ranks, 1, MPI_INTEGER, node, ierr)
  call check('window put', nn == 1 .or. wbuf(i + 1) == ranks(i + 1))
  call MPI_Win_free(win, ierr)
  call MPI_Group_free(g, ierr)
  call MPI_Group_free(wg, ierr)
  call MPI_Comm_free(node, ierr)

  ! ---- topologies: a ring three ways, and a name ----
  do i = 1, nr
    gindex(i) = i
    gedges(i) = mod(i, nr)
  end do
  call MPI_Graph_create(MPI_COMM_WORLD, nr, gindex, gedges, .false., graph, ierr)
  srcs(1) = rank
  degs(1) = 1
  dsts(1) = peer
  call MPI_Dist_graph_create(MPI_COMM_WORLD, 1, srcs, degs, dsts, MPI_UNWEIGHTED, MPI_INFO_NULL, &
                             .false., dg, ierr)
  srcs(1) = prev
  call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, srcs, MPI_UNWEIGHTED, 1, dsts, &
                                      MPI_UNWEIGHTED, MPI_INFO_NULL, .false., dga, ierr)
  call MPI_Comm_size(graph, v, ierr)
  call check('graph_create', v == nr)
  call MPI_Comm_size(dga, v, ierr)
  call check('dist_graph_create_adjacent', v == nr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_set_name(dup, 'usempi', ierr)
  call MPI_Comm_get_name(dup, name, nlen, ierr)
  call check('set_name', name(1:nlen) == 'usempi')
  call MPI_Comm_free(dup, ierr)
  call MPI_Comm_free(dga, ierr)
  call MPI_Comm_free(dg, ierr)
  call MPI_Comm_free(graph, ierr)

  call MPI_Reduce(nfail, tot, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a)', 'use mpi: ', tot, ' failed'
  call MPI_Finalize(ierr)

contains

  ! a receive from the previous rank into y(1) (qs(1)) and a send to the next (qs(2))
  subroutine ring(tag)
    integer, intent(in) :: tag
    y = -1
    call MPI_Irecv(y, 1, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, qs(1), ierr)
    call MPI_Isend(x, 1, MPI_DOUBLE_PRECISION, peer, tag, MPI_COMM_WORLD, qs(2), ierr)
  end subroutine ring

  subroutine check(what, ok)
    character(len=*), intent(in) :: what
    logical, intent(in) :: ok
    if (.not. ok) then
      nfail = nfail + 1
      print '(a,i0,a,a,a)', 'use mpi: rank ', rank, ': ', what, ' failed'
    end if
  end subroutine check
end program use_mpi_cases
