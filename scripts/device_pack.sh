#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Builds here what a GPU machine runs, so that its time goes to running, not building, and packs
# it into .device-pack/ (git-ignored, about 49 MB; copy it to the GPU machine's checkout):
#   .device-pack/gpu/       flotilla_cuda_gpu_tests, fashion_mnist_gpu, fashion_mnist_gpu_tcp,
#                           flotilla_gpu_train_bench (sm_90, for the H100/H200), for PREBUILT= of
#                           scripts/gpu_check.sh
#   .device-pack/scaling/   bench/ and tools/ as scripts/scaling_check.sh expects a build folder
#                           (FLOTILLA_SCALING_BUILD_DIR=.device-pack/scaling), with flotilla_tcp_train_bench
#                           for bench/ddp_vs_pytorch.py. Compiled for MARCH (default x86-64-v4: AVX-512,
#                           which the GPU machine's Xeon has), not -march=native of this machine:
#                           Eigen's kernels without AVX (plain x86-64) run the MLP several times slower
#                           (docs/benchmarks.md, "16 cores").
#   .device-pack/fashion-mnist/   the IDX files, for FLOTILLA_FASHION_MNIST=
#   .device-pack/deps/      Eigen and doctest (scripts/gpu_vendor_deps.sh without Boost), for what is
#                           built there: the MPI benchmark, against that machine's MPI (DEPS=)
#   .device-pack/iproute/   ip and tc with their libraries, run through the loader (the GPU machine
#                           has no iproute2), for the emulated cluster there:
#                           PATH=$PWD/.device-pack/iproute/bin:$PATH scripts/cluster.sh --hosts 4 --rate 5gbit -- \
#                             bench/cluster_allreduce.sh .device-pack/scaling
# Binaries built on Debian 12 (glibc 2.36) run on newer systems; they find libcudart and libcublas
# of the device's own CUDA 13 toolkit.
#
#   scripts/device_pack.sh                       # here
#   PREBUILT=.device-pack/gpu FLOTILLA_FASHION_MNIST=.device-pack/fashion-mnist scripts/gpu_check.sh   # there
set -euo pipefail
cd "$(dirname "$0")/.."
pack=.device-pack march=${MARCH:-x86-64-v4}
rm -rf "$pack"
mkdir -p "$pack/gpu" "$pack/scaling/bench" "$pack/scaling/tools" "$pack/fashion-mnist"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_WITH_CUDA=ON -DFLOTILLA_BUILD_TOOLS=OFF \
      -DFLOTILLA_WITH_TCP=ON -DFLOTILLA_WITH_MPI=OFF > /dev/null
cmake --build build-gpu -j "$(nproc)" --target flotilla_cuda_gpu_tests fashion_mnist_gpu fashion_mnist_gpu_tcp \
      flotilla_gpu_train_bench
cp build-gpu/tests/cuda/flotilla_cuda_gpu_tests build-gpu/examples/fashion_mnist_gpu build-gpu/examples/fashion_mnist_gpu_tcp \
   build-gpu/bench/flotilla_gpu_train_bench "$pack/gpu/"
cmake -S . -B build-scaling -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_BUILD_BENCH=ON -DFLOTILLA_BUILD_TESTS=OFF \
      -DFLOTILLA_BUILD_EXAMPLES=OFF -DFLOTILLA_BUILD_TOOLS=ON -DFLOTILLA_WITH_MPI=OFF -DFLOTILLA_WITH_CUDA=OFF \
      -DFLOTILLA_NATIVE=OFF -DCMAKE_CXX_FLAGS="-march=$march" > /dev/null
cmake --build build-scaling -j "$(nproc)" --target flotilla_tcp_busbw_bench flotilla_loopback_bench \
      flotilla_core_latency_bench flotilla_tcp_train_bench flotilla-launch
cp build-scaling/bench/flotilla_tcp_busbw_bench build-scaling/bench/flotilla_loopback_bench \
   build-scaling/bench/flotilla_core_latency_bench build-scaling/bench/flotilla_tcp_train_bench "$pack/scaling/bench/"
cp build-scaling/tools/flotilla-launch "$pack/scaling/tools/"
cp /usr/share/datasets/fashion-mnist/*.gz "$pack/fashion-mnist/"
mkdir -p "$pack/iproute/bin" "$pack/iproute/lib"
for tool in ip tc; do
  cp "/usr/sbin/$tool" "$pack/iproute/bin/$tool.real"
  ldd "/usr/sbin/$tool" | awk '/=>/ && $3 !~ /lib(c|m)\.so/ { print $3 }' | xargs -r cp -L -t "$pack/iproute/lib/"
  # The loader with the libraries' folder, not LD_LIBRARY_PATH: `ip netns exec` passes its
  # environment on to the programs it runs.
  printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")\nexec /lib64/ld-linux-x86-64.so.2 --library-path "$d/../lib" "$d/%s.real" "$@"\n' \
    "$tool" > "$pack/iproute/bin/$tool"
  chmod +x "$pack/iproute/bin/$tool"
done
[ -d .gpu-deps ] || scripts/gpu_vendor_deps.sh
mkdir -p "$pack/deps"
tar -C .gpu-deps --exclude=include/boost -cf - . | tar -C "$pack/deps" -xf -
du -sh "$pack"
