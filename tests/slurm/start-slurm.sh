#!/usr/bin/env bash
# Bring up a throw-away one-node SLURM cluster (munged + slurmctld + slurmd)
# on this machine, for tests. No systemd needed: the daemons are run directly.
# Needs root and the Debian packages below; installs nothing itself.
# Idempotent: exits 0 at once when a controller already answers and the node
# is usable. Logs: /var/log/slurm/{slurmctld,slurmd}.log, /var/log/munge/.
set -euo pipefail
export PATH="/usr/sbin:/sbin:$PATH"
me=start-slurm.sh

if [[ $EUID -ne 0 ]]; then
    echo "$me: must run as root (it starts munged, slurmctld and slurmd)" >&2
    exit 1
fi

missing=()
for bin in munged slurmctld slurmd sinfo; do
    command -v "$bin" >/dev/null || missing+=("$bin")
done
if ((${#missing[@]})); then
    echo "$me: missing ${missing[*]}; install with: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge" >&2
    exit 1
fi

host=$(hostname -s)
ctld_log=/var/log/slurm/slurmctld.log
slurmd_log=/var/log/slurm/slurmd.log

# Node state as sinfo prints it ("idle", "down*", "drained", ...), or empty.
node_state() { timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null | head -n1 || true; }
ctld_up() { [[ $(timeout 5 scontrol ping 2>/dev/null) == *"is UP"* ]]; }
# A node that runs jobs is as good as an idle one; a trailing '*' means
# slurmd is not responding.
node_ok() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }
# Ask the local slurmd itself: a restarted slurmctld reports the node idle
# from its saved state even while slurmd is dead.
slurmd_up() { timeout 5 scontrol show slurmd >/dev/null 2>&1; }

if ctld_up && slurmd_up && node_ok; then
    exit 0
fi

fail() { # fail WHAT LOGFILE
    echo "$me: $1 did not start; last lines of $2:" >&2
    tail -n 15 "$2" >&2 2>/dev/null || true
    exit 1
}

# --- munge ---------------------------------------------------------------
if [[ ! -s /etc/munge/munge.key ]]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
fi
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    # /run is a tmpfs normally populated by systemd's RuntimeDirectory=.
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    rm -f /run/munge/munge.socket.2*   # stale socket from a killed munged
    runuser -u munge -- munged --force || fail munged /var/log/munge/munged.log
    for _ in $(seq 20); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.5
    done
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 || fail munged /var/log/munge/munged.log
fi

# --- slurm.conf ----------------------------------------------------------
install -d -m 0755 /etc/slurm /var/log/slurm /var/spool/slurmctld /var/spool/slurmd
cat >/etc/slurm/slurm.conf <<EOF
# Written by trtkit tests/slurm/start-slurm.sh: one-node test cluster.
ClusterName=trtkit-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$ctld_log
SlurmdLogFile=$slurmd_log
# No cgroups anywhere: plain /proc process tracking, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
# Cores are the consumable, so each 1-CPU array task takes one of them.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
# A node that was down comes back by itself once slurmd registers.
ReturnToService=2
# Finished jobs stay in squeue -t all for 10 minutes.
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

# --- daemons --------------------------------------------------------------
# Both fork into the background, and each replaces a stale instance of
# itself named in its pid file.
ctld_up || slurmctld || fail slurmctld "$ctld_log"
slurmd_up || slurmd || fail slurmd "$slurmd_log"

# Wait up to 30 s (by the clock: a hung daemon makes each probe slow).
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
    if ctld_up && slurmd_up; then
        case $(node_state) in
            idle|mixed|allocated|completing) exit 0 ;;
            down*|drain*) scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
        esac
    fi
    sleep 1
done
ctld_up || fail slurmctld "$ctld_log"
fail "slurmd (node $host is '$(node_state)')" "$slurmd_log"
