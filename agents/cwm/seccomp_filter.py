"""The sandbox's seccomp filter, built by libseccomp (Debian's `python3-seccomp`), not by hand.

Run by the system interpreter that has the binding (`/usr/bin/python3 -I seccomp_filter.py`):
it writes the compiled BPF program to stdout, and `agents.cwm.sandbox` hands that to
bubblewrap (`bwrap --seccomp FD`), which loads it just before it starts the worker; it then
holds for the worker and every process it starts, and cannot be removed.

The filter allows by default and refuses (EPERM) the system calls a game model never needs
and an escape would: sockets, tracing and other processes' memory, mounts and namespaces,
BPF, kernel keys, modules, perf, userfaultfd, io_uring, handles, clocks, tty injection.
`clone3` answers ENOSYS so that the C library falls back to `clone`, whose namespace flags the
filter can read (clone3 passes them in memory, where seccomp cannot look). Only the native
architecture is allowed (a 32-bit system call is killed by libseccomp's default bad-arch
action), so the list cannot be dodged through another system call table.

Limits: a deny list (the allowed rest is what CPython needs, which is most of Linux); syscalls
this libseccomp does not know are skipped, not refused. Stdlib and `seccomp` only: this file
runs outside the project's environment.
"""

from __future__ import annotations

import errno
import sys

import seccomp  # type: ignore[import-not-found]

REFUSED = (
    # networking: no socket at all (the pipes to the parent are pipes)
    "socket", "socketpair",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "pidfd_open",
    # file systems and namespaces
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "name_to_handle_at",
    "open_by_handle_at", "quotactl", "quotactl_fd", "swapon", "swapoff", "mknod", "mknodat",
    # kernel interfaces
    "bpf", "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "fanotify_init", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "syslog", "acct", "lookup_dcookie",
    "uselib", "personality", "iopl", "ioperm", "vhangup", "sysfs", "ustat", "_sysctl", "nfsservctl",
    # clocks and names of the machine
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
)  # fmt: skip
REQUIRED = ("socket", "ptrace", "mount", "unshare", "setns", "bpf", "keyctl")
# Every namespace flag of clone(2): a process inside may not make a namespace of its own.
CLONE_NEW_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)
TIOCSTI = 0x5412  # push characters into a terminal's input


def build() -> seccomp.SyscallFilter:
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    for name in REFUSED:
        try:
            f.add_rule(deny, name)
        except (RuntimeError, ValueError):  # unknown to this libseccomp: nothing to refuse
            if name in REQUIRED:
                raise
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NEW_FLAGS:
        f.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    f.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, TIOCSTI))
    return f


def main() -> int:
    build().export_bpf(sys.stdout)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
