"""A task's processes: started in a cgroup of their own, supervised, capped, and stopped with SIGINT alone."""
