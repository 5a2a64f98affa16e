/* hive._clone3: start a program in a new process that is set up before its first instruction.

   One call, spawn(), clones the caller with clone3(2): CLONE_INTO_CGROUP puts the child in a
   cgroup as it is created (joining one later, by a write to cgroup.procs, takes the cgroup
   lock for writing and waits an RCU grace period), CLONE_PIDFD hands back a pidfd, and
   CLONE_VFORK holds the caller until the child has exec'd or failed. Between the clone and the
   exec, the child leads a new session, asks for a parent-death signal and checks that its
   parent is still there, becomes the child subreaper, takes an RLIMIT_FSIZE, sets up its
   descriptors and directory and execs: what subprocess's preexec_fn did, with no Python in the
   child. The caller may have other threads, so the child makes only async-signal-safe calls.

   Errors: clone3 missing from the kernel, or a kernel that cannot clone into a cgroup, raises
   _Unsupported (an OSError, private: hive._spawn falls back on it); a step of the child that
   fails raises OSError with its errno, and the filename of the directory or program where one
   was the cause. Python's side is hive/_spawn.py. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

#define HIVE_CLONE_VFORK 0x00004000ULL
#define HIVE_CLONE_PIDFD 0x00001000ULL
#define HIVE_CLONE_INTO_CGROUP 0x200000000ULL
#define HIVE_CLOSE_RANGE_CLOEXEC (1U << 2)

/* struct clone_args as of Linux 5.7 (CLONE_ARGS_SIZE_VER2), declared here so that older
   kernel headers build it too. */
struct hive_clone_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
    uint64_t set_tid;
    uint64_t set_tid_size;
    uint64_t cgroup;
};

/* The step of the child that failed, reported to the parent with its errno. */
enum step {
    STEP_SIGNALS = 1,
    STEP_SESSION,
    STEP_DEATH_SIGNAL,
    STEP_PARENT_GONE,
    STEP_SUBREAPER,
    STEP_FSIZE,
    STEP_FDS,
    STEP_CWD,
    STEP_EXEC,
};

static const char *const step_names[] = {
    "", "signals", "setsid", "prctl(PR_SET_PDEATHSIG)", "the parent exited before the child could exec",
    "prctl(PR_SET_CHILD_SUBREAPER)", "setrlimit(RLIMIT_FSIZE)", "descriptors", "chdir", "execve",
};

static PyObject *Unsupported;

struct child_plan {
    const char *path;
    char *const *argv;
    char *const *envp;
    const char *cwd;
    int stdio[3];
    const int *keep;
    Py_ssize_t nkeep;
    int new_session;
    int death_signal;
    pid_t parent;
    int subreaper;
    long long fsize;
    const sigset_t *mask;
    int report;
};

static void report_and_exit(int fd, int step) {
    int message[2] = {step, errno};
    ssize_t ignored = write(fd, message, sizeof message);
    (void)ignored;
    _exit(127);
}

/* In the child: async-signal-safe calls only, then the exec. Never returns. */
static void run_child(const struct child_plan *plan) {
    struct sigaction action;
    int fd, sig;
    Py_ssize_t i;

    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    for (sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL) {
            sigaction(sig, &action, NULL);
        }
    }
    /* Python ignores these two; a program expects them at their default (subprocess's
       restore_signals). */
    sigaction(SIGPIPE, &action, NULL);
    sigaction(SIGXFSZ, &action, NULL);
    if (sigprocmask(SIG_SETMASK, plan->mask, NULL) != 0) report_and_exit(plan->report, STEP_SIGNALS);

    if (plan->new_session && setsid() < 0) report_and_exit(plan->report, STEP_SESSION);
    if (plan->death_signal) {
        if (prctl(PR_SET_PDEATHSIG, (unsigned long)plan->death_signal, 0, 0, 0) != 0)
            report_and_exit(plan->report, STEP_DEATH_SIGNAL);
        if (getppid() != plan->parent) {
            errno = ESRCH;
            report_and_exit(plan->report, STEP_PARENT_GONE);
        }
    }
    if (plan->subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        report_and_exit(plan->report, STEP_SUBREAPER);
    if (plan->fsize >= 0) {
        struct rlimit limit = {(rlim_t)plan->fsize, (rlim_t)plan->fsize};
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) report_and_exit(plan->report, STEP_FSIZE);
    }

    /* stdin, stdout and stderr: a source that is itself 0, 1 or 2 is moved out of the way
       first, so that no dup2 overwrites a source still to be used. */
    int sources[3];
    for (i = 0; i < 3; i++) {
        sources[i] = plan->stdio[i];
        if (sources[i] >= 0 && sources[i] < 3 && sources[i] != i) {
            sources[i] = fcntl(sources[i], F_DUPFD_CLOEXEC, 3);
            if (sources[i] < 0) report_and_exit(plan->report, STEP_FDS);
        }
    }
    for (i = 0; i < 3; i++) {
        if (sources[i] < 0) continue;
        if (sources[i] == i) {
            if (fcntl((int)i, F_SETFD, 0) != 0) report_and_exit(plan->report, STEP_FDS);
        } else if (dup2(sources[i], (int)i) < 0) {
            report_and_exit(plan->report, STEP_FDS);
        }
    }
    /* Every other descriptor closes at the exec, but those asked to be kept. Kernels before
       5.11 lack CLOSE_RANGE_CLOEXEC: Python opens its descriptors close-on-exec anyway. */
    syscall(SYS_close_range, 3U, ~0U, HIVE_CLOSE_RANGE_CLOEXEC);
    for (i = 0; i < plan->nkeep; i++) {
        fd = plan->keep[i];
        if (fd == plan->report) continue;
        if (fcntl(fd, F_SETFD, 0) != 0) report_and_exit(plan->report, STEP_FDS);
    }
    if (fcntl(plan->report, F_SETFD, FD_CLOEXEC) != 0) report_and_exit(plan->report, STEP_FDS);

    if (plan->cwd != NULL && chdir(plan->cwd) != 0) report_and_exit(plan->report, STEP_CWD);
    execve(plan->path, plan->argv, plan->envp);
    report_and_exit(plan->report, STEP_EXEC);
}

/* A NULL-terminated array of the bytes in `seq` (borrowed: valid while `seq` lives). */
static char **byte_strings(PyObject *seq, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    char **out = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    if (out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s: every item must be bytes", what);
            PyMem_Free(out);
            Py_DECREF(fast);
            return NULL;
        }
        out[i] = PyBytes_AS_STRING(item);
    }
    Py_DECREF(fast); /* the items stay alive in `seq` */
    return out;
}

static PyObject *spawn(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"path", "argv", "env", "cwd", "stdio", "keep_fds", "cgroup_fd", "new_session",
                               "death_signal", "subreaper", "fsize", NULL};
    PyObject *path_obj, *argv_obj, *env_obj, *cwd_obj, *keep_obj;
    int stdin_fd, stdout_fd, stderr_fd, cgroup_fd, new_session, death_signal, subreaper;
    long long fsize;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "SOOO(iii)OipipL:spawn", keywords, &path_obj, &argv_obj,
                                     &env_obj, &cwd_obj, &stdin_fd, &stdout_fd, &stderr_fd, &keep_obj,
                                     &cgroup_fd, &new_session, &death_signal, &subreaper, &fsize))
        return NULL;
    if (cwd_obj != Py_None && !PyBytes_Check(cwd_obj)) {
        PyErr_SetString(PyExc_TypeError, "cwd must be bytes or None");
        return NULL;
    }

    PyObject *result = NULL;
    char **argv = NULL, **envp = NULL;
    int *keep = NULL;
    PyObject *keep_fast = PySequence_Fast(keep_obj, "keep_fds must be a sequence of ints");
    if (keep_fast == NULL) return NULL;
    Py_ssize_t nkeep = PySequence_Fast_GET_SIZE(keep_fast);
    keep = PyMem_Calloc((size_t)nkeep + 1, sizeof(int));
    if (keep == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nkeep; i++) {
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(keep_fast, i));
        if (fd == -1 && PyErr_Occurred()) goto done;
        keep[i] = (int)fd;
    }
    argv = byte_strings(argv_obj, "argv");
    if (argv == NULL) goto done;
    envp = byte_strings(env_obj, "env");
    if (envp == NULL) goto done;

    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    sigset_t all, old;
    sigfillset(&all);
    struct child_plan plan = {
        .path = PyBytes_AS_STRING(path_obj),
        .argv = argv,
        .envp = envp,
        .cwd = cwd_obj == Py_None ? NULL : PyBytes_AS_STRING(cwd_obj),
        .stdio = {stdin_fd, stdout_fd, stderr_fd},
        .keep = keep,
        .nkeep = nkeep,
        .new_session = new_session,
        .death_signal = death_signal,
        .parent = getpid(),
        .subreaper = subreaper,
        .fsize = fsize,
        .mask = &old,
        .report = pipe_fds[1],
    };
    int pidfd = -1;
    struct hive_clone_args clone_args;
    memset(&clone_args, 0, sizeof clone_args);
    clone_args.flags = HIVE_CLONE_VFORK | HIVE_CLONE_PIDFD;
    clone_args.pidfd = (uint64_t)(uintptr_t)&pidfd;
    clone_args.exit_signal = SIGCHLD;
    if (cgroup_fd >= 0) {
        clone_args.flags |= HIVE_CLONE_INTO_CGROUP;
        clone_args.cgroup = (uint64_t)cgroup_fd;
    }

    long pid;
    int clone_errno = 0;
    int message[2] = {0, 0};
    ssize_t got;
    Py_BEGIN_ALLOW_THREADS
    /* No signal handler of this process may run in the child before its exec. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = syscall(SYS_clone3, &clone_args, sizeof clone_args);
    if (pid == 0) run_child(&plan);
    clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(pipe_fds[1]);
    /* CLONE_VFORK: the child has exec'd (the pipe closed with it) or written why not. */
    if (pid > 0) {
        do {
            got = read(pipe_fds[0], message, sizeof message);
        } while (got < 0 && errno == EINTR);
        if (got == (ssize_t)sizeof message) {
            int status;
            while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR) {
            }
            close(pidfd);
        }
    }
    close(pipe_fds[0]);
    Py_END_ALLOW_THREADS

    if (pid < 0) {
        errno = clone_errno;
        /* No clone3 (before 5.3, or a seccomp filter), or one that cannot clone into a cgroup
           (before 5.7: E2BIG for the longer struct; EINVAL/EOPNOTSUPP for a cgroup it refuses). */
        if (clone_errno == ENOSYS || clone_errno == E2BIG || clone_errno == EINVAL || clone_errno == EOPNOTSUPP)
            PyErr_SetFromErrno(Unsupported);
        else
            PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    if (message[0] != 0) {
        errno = message[1];
        int step = message[0];
        if (step == STEP_CWD) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, cwd_obj);
        } else if (step == STEP_EXEC) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_obj);
        } else {
            PyObject *what = PyUnicode_FromString(step_names[step]);
            if (what != NULL) {
                PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, what);
                Py_DECREF(what);
            }
        }
        goto done;
    }
    result = Py_BuildValue("(li)", pid, pidfd);

done:
    Py_DECREF(keep_fast);
    PyMem_Free(keep);
    PyMem_Free(argv);
    PyMem_Free(envp);
    return result;
}

static PyMethodDef methods[] = {
    {"spawn", (PyCFunction)(void (*)(void))spawn, METH_VARARGS | METH_KEYWORDS,
     "spawn(path, argv, env, cwd, stdio, keep_fds, cgroup_fd, new_session, death_signal, subreaper, fsize)"
     " -> (pid, pidfd)\n\nStart `path` with `argv` and `env` (bytes), set up as hive/_clone3.c says."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "hive._clone3", "clone3(2) spawns: see hive/_spawn.py.", -1, methods,
};

PyMODINIT_FUNC PyInit__clone3(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Unsupported = PyErr_NewExceptionWithDoc(
        "hive._clone3.Unsupported", "The kernel cannot clone3 (into a cgroup): spawn the slower way.",
        PyExc_OSError, NULL);
    if (Unsupported == NULL || PyModule_AddObjectRef(m, "_Unsupported", Unsupported) < 0) {
        Py_XDECREF(Unsupported);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
