#!/usr/bin/env bash
# tests/mpi/netns_run.sh - run an MPI job across TWO network namespaces on
# this one machine, so that the job's traffic really crosses a (virtual)
# network instead of shared memory / loopback, then clean everything up.
#
#   tests/mpi/netns_run.sh NP -- COMMAND [ARGS...]
#
# Why: a multi-node MPI run is what the distributed code paths see in
# production; one machine with plain `mpirun -np N` only exercises the
# shared-memory transport.  Two namespaces joined by a veth pair give two
# "nodes" with their own addresses, and OpenMPI then talks TCP between them
# (both its out-of-band channel, mpirun <-> orted, and the MPI traffic).
#
# How:
#   - namespaces sp-mpi-a-PID and sp-mpi-b-PID, veth pair 10.213.X.1/24 (A)
#     <-> 10.213.X.2/24 (B), X random per run; lo and the veths up;
#   - a hostfile "10.213.X.1 slots=ceil(NP/2)" + "10.213.X.2 slots=floor";
#     mpirun runs inside A (so A's address is its own node) and fills A's
#     slots first: ranks 0..k-1 run in A, k..NP-1 in B;
#   - no ssh: plm_rsh_agent is a generated launcher that gets "HOST cmd..."
#     like ssh would and runs the command line through `sh -c` inside the
#     namespace owning HOST (`ip netns exec`);
#   - TCP only, restricted to the veth subnet (pml ob1, btl tcp,self, btl/oob
#     if_include CIDR), even between two ranks of one namespace.  No
#     shared-memory btl: both "nodes" share one hostname and /dev/shm, so
#     their vader segment names collide (ranks segfault in
#     mca_btl_vader_poll_handle_frag); pml ob1 so that no UCX / libfabric
#     pml (which could use shared memory) is picked on a machine having them;
#   - --bind-to none: ORTE believes each "node" has all the cores and would
#     pin rank 0 of A and rank 0 of B to the same core; --noprefix: mpirun
#     run by absolute path otherwise prepends /usr/bin to the ranks' PATH
#     (shadowing a venv's python) and sets LD_LIBRARY_PATH=/usr/lib;
#   - PATH, LD_LIBRARY_PATH, every SEEDPIPE_* variable set, and the names in
#     NETNS_EXPORT (space separated) are forwarded to all ranks (-x); ranks
#     start in the caller's working directory (--wdir "$PWD"), so a relative
#     COMMAND such as ./build/foo works; rank stdin is /dev/null.
#
# Environment:
#   NETNS_TIMEOUT  seconds for the whole mpirun (default 120; 0: none); then
#                  TERM, then KILL 10 s later.
#   NETNS_EXPORT   extra environment variable names to forward.
#   NETNS_MPIRUN_ARGS  extra mpirun options (word-split), e.g. "--tag-output".
#
# Exit status: mpirun's (the job's), 124 on timeout, 2 on a usage error, 1 if
# sp-mpi-{a,b}-PID already exist (left by a run killed with -9),
# 77 with "netns_run: SKIP: <reason>" on stderr when the machine cannot do it
# (not root / no CAP_SYS_ADMIN, no `ip`, no mpirun, no `timeout`), 130/143 when
# interrupted.  Whatever happens, an EXIT/INT/TERM trap kills every process
# left in either namespace, deletes both namespaces (and so the veth pair)
# and removes the temp files.
#
# This script prints one line on stdout before the job starts:
#   netns_run: ranks 0..k-1 in A (10.213.X.1), k..NP-1 in B (10.213.X.2)
# Callers should tolerate OpenMPI's own boxed help messages on stderr when a
# rank fails ("Primary job terminated normally, but 1 process returned a
# non-zero exit code...", "mpirun detected that one or more processes
# exited with non-zero status..."), and that all ranks report the same
# hostname (the namespaces share the UTS namespace).  A failed job takes
# OpenMPI ~3 s to tear down.
set -euo pipefail

prog=netns_run
usage() { echo "usage: $0 NP -- COMMAND [ARGS...]" >&2; exit 2; }
skip() { echo "$prog: SKIP: $*" >&2; exit 77; }

[[ $# -ge 3 && ${1:-} =~ ^[1-9][0-9]*$ && ${2:-} == -- ]] || usage
np=$1
shift 2

timeout_s=${NETNS_TIMEOUT:-120}
[[ $timeout_s =~ ^[0-9]+$ ]] || { echo "$prog: NETNS_TIMEOUT must be whole seconds" >&2; exit 2; }

command -v ip >/dev/null 2>&1 || skip "'ip' (iproute2) not found"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not found"
command -v timeout >/dev/null 2>&1 || skip "'timeout' (coreutils) not found"
[[ $(id -u) -eq 0 ]] || skip "needs root (CAP_SYS_ADMIN) to create network namespaces"
# Canonical directory: OpenMPI derives its install prefix from an absolute
# argv[0], and /bin/mpirun (usrmerge, /bin before /usr/bin in PATH) gives "/",
# which it refuses ("A prefix was supplied to mpirun that only contained
# slashes").
mpirun_bin=$(command -v mpirun)
mpirun_bin=$(cd "$(dirname "$mpirun_bin")" && pwd -P)/$(basename "$mpirun_bin")

ns_a=sp-mpi-a-$$
ns_b=sp-mpi-b-$$
net=10.213.$((RANDOM % 200))
ip_a=$net.1
ip_b=$net.2
cidr=$net.0/24
tmp=
job=
made=()     # namespaces this run created (and only these are deleted)

# Every process still in either namespace (a process that has exited, even a
# zombie, is in none).
# shellcheck disable=SC2317  # (reached through the traps)
ns_pids() {
    local ns
    for ns in "${made[@]}"; do ip netns pids "$ns" 2>/dev/null || true; done
}

# shellcheck disable=SC2317,SC2086  # (reached through the traps; pid lists)
cleanup() {
    local ns pids seen="" i p
    trap - EXIT INT TERM
    # Interrupted: TERM to timeout, which passes it on to mpirun (and its
    # process group); mpirun then stops its job and the orted.
    if [[ -n $job ]]; then kill -TERM "$job" 2>/dev/null || true; fi
    # Leftovers (orphans of killed ranks, an orted still winding down after a
    # timeout): TERM, up to 3 s of grace, then kill -9 until none is left.
    pids=$(ns_pids)
    if [[ -n $pids ]]; then
        seen=$pids
        kill -TERM $pids 2>/dev/null || true
        for i in {1..80}; do
            sleep 0.1
            pids=$(ns_pids)
            [[ -z $pids ]] && break
            seen+=" $pids"
            if ((i > 30)); then kill -9 $pids 2>/dev/null || true; fi
        done
    fi
    if [[ -n $job ]]; then wait "$job" 2>/dev/null || true; fi
    for ns in "${made[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
    # The orphans were re-parented to init: give it up to 3 s to reap them, so
    # that no "<defunct>" entry outlives this script (instant on most inits).
    for i in {1..30}; do
        pids=
        for p in $seen; do if [[ -e /proc/$p ]]; then pids+=" $p"; fi; done
        [[ -z $pids ]] && break
        seen=$pids
        sleep 0.1
    done
    if [[ -n $tmp ]]; then rm -rf "$tmp"; fi
}
trap 'cleanup' EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

for ns in "$ns_a" "$ns_b"; do
    if [[ -e /run/netns/$ns ]]; then
        echo "$prog: namespace $ns exists (left by a killed run?" \
             "'ip netns delete $ns')" >&2
        exit 1
    fi
    if ! err=$(ip netns add "$ns" 2>&1); then
        skip "cannot create a network namespace: $err"
    fi
    made+=("$ns")
done
if ! err=$(ip netns exec "$ns_a" true 2>&1); then
    skip "cannot enter a network namespace (ip netns exec): $err"
fi
# Created inside A with its peer moved straight to B: the interface names
# never exist in the root namespace, so they cannot collide there.
if ! err=$(ip -n "$ns_a" link add veth-a type veth peer name veth-b netns "$ns_b" 2>&1); then
    skip "cannot create a veth pair: $err"
fi
ip -n "$ns_a" addr add "$ip_a/24" dev veth-a
ip -n "$ns_b" addr add "$ip_b/24" dev veth-b
ip -n "$ns_a" link set lo up
ip -n "$ns_b" link set lo up
ip -n "$ns_a" link set veth-a up
ip -n "$ns_b" link set veth-b up

tmp=$(mktemp -d /tmp/sp-netns-run.XXXXXX)

# The rsh "agent": OpenMPI runs it as `AGENT [ssh-like options] HOST word...`
# and, like ssh, expects the words joined by spaces to be a shell command line
# (it quotes for a remote shell: PATH=...; export PATH; orted -mca ess "env"...).
cat >"$tmp/launcher" <<EOF
#!/bin/sh
# generated by $prog: ssh stand-in, HOST -> network namespace
while [ \$# -gt 0 ]; do
    case "\$1" in
        -[opliFJ]) shift 2 ;;   # ssh options taking a value
        -*) shift ;;            # -x, -q, -T, ...
        *) break ;;
    esac
done
[ \$# -ge 2 ] || { echo "$prog launcher: usage: HOST COMMAND..." >&2; exit 255; }
host=\$1; shift
case "\$host" in
    $ip_a) ns=$ns_a ;;
    $ip_b) ns=$ns_b ;;
    *) echo "$prog launcher: unknown host '\$host'" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod 700 "$tmp/launcher"

k=$(((np + 1) / 2))     # ranks in A (ceil)
nb=$((np - k))          # ranks in B (floor)
echo "$ip_a slots=$k" >"$tmp/hostfile"
if [[ $nb -gt 0 ]]; then echo "$ip_b slots=$nb" >>"$tmp/hostfile"; fi

if [[ $nb -gt 0 ]]; then
    echo "$prog: ranks 0..$((k - 1)) in A ($ip_a), $k..$((np - 1)) in B ($ip_b)"
else
    echo "$prog: ranks 0..$((k - 1)) in A ($ip_a), none in B ($ip_b)"
fi

exports=(-x PATH)
[[ -n ${LD_LIBRARY_PATH:-} ]] && exports+=(-x LD_LIBRARY_PATH)
for name in $(compgen -e | grep '^SEEDPIPE_' || true) ${NETNS_EXPORT:-}; do
    exports+=(-x "$name")
done

# shellcheck disable=SC2206
extra=(${NETNS_MPIRUN_ARGS:-})
mpirun_args=(
    --allow-run-as-root             # root runs this (namespaces need it)
    --noprefix                      # else PATH=/usr/bin:..., LD_LIBRARY_PATH=/usr/lib
    -np "$np"
    --hostfile "$tmp/hostfile"
    --map-by slot                   # fill A's slots, then B's
    --bind-to none                  # both "nodes" share the same cores
    --mca plm rsh
    --mca plm_rsh_agent "$tmp/launcher"
    --mca pml ob1
    --mca btl "tcp,self"            # no vader: shared hostname + /dev/shm
    --mca btl_tcp_if_include "$cidr"
    --mca oob_tcp_if_include "$cidr"
    --wdir "$PWD"
    --mca orte_tmpdir_base "$tmp"   # session dirs die with $tmp
    "${exports[@]}"
    "${extra[@]}"
)

# In the background + wait, so that INT/TERM run the trap at once instead of
# after mpirun returns; timeout puts itself in its own process group and
# signals all of it.
rc=0
timeout -k 10 "$timeout_s" ip netns exec "$ns_a" \
    "$mpirun_bin" "${mpirun_args[@]}" "$@" </dev/null &
job=$!
wait "$job" || rc=$?
job=
if [[ $rc -eq 124 ]]; then echo "$prog: mpirun timed out after ${timeout_s}s" >&2; fi
exit "$rc"
