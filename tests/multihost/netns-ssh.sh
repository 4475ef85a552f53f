#!/bin/sh
# netns-ssh.sh HOST WORDS...: what ssh does, for a network-namespace host: joins WORDS into one
# command line and runs it in a shell on HOST. Open MPI's rsh launcher (--mca plm_rsh_agent)
# builds its orted command for a remote shell (it even starts with a blank word), so a plain
# `ip netns exec` cannot stand in for ssh there.
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
