// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_HOSTDEVICE_HPP_INCLUDED
#define FLOTILLA_CORE_HOSTDEVICE_HPP_INCLUDED
// FLOTILLA_HOST_DEVICE marks a function that both engines run: the CPU engine calls it from host
// code, the CUDA engine from its kernels. Under nvcc it expands to __host__ __device__; under any
// other compiler to nothing, so the same header builds without CUDA.
//
// FLOTILLA_HOST_DEVICE_TEMPLATE goes before such a function template that is also instantiated
// with host-only types (Eigen arrays on the CPU path): it tells nvcc that only the instantiations
// a kernel calls need to be device code.
#if defined(__CUDACC__)
#define FLOTILLA_HOST_DEVICE __host__ __device__
#define FLOTILLA_HOST_DEVICE_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define FLOTILLA_HOST_DEVICE
#define FLOTILLA_HOST_DEVICE_TEMPLATE
#endif
#endif  // FLOTILLA_CORE_HOSTDEVICE_HPP_INCLUDED
