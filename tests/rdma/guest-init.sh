#!/bin/sh
# PID 1 of the RDMA test VM (scripts/env/rdma-vm.sh copies it into the image as /sbin/kolo-init).
# Mounts what a system needs, the repository (9p tag "kolo", read-only) and the results folder
# (tag "results"), runs tests/rdma/guest-run.sh from the repository, and powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
hostname kolo-rdma-vm
modprobe 9pnet_virtio
modprobe 9p
mkdir -p /kolo /results
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,ro kolo /kolo || echo "kolo-init: cannot mount the repository"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 results /results || echo "kolo-init: cannot mount the results folder"
# The kernel hands unknown name=value boot parameters to init as environment variables.
export kolo_build kolo_filter
sh /kolo/tests/rdma/guest-run.sh 2>&1 | tee /results/guest.log
touch /results/done
sync
echo o > /proc/sysrq-trigger
sleep 30
