// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCPLAUNCH_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCPLAUNCH_HPP_INCLUDED
// The local launcher of TCP jobs (launch(), run_job(), LaunchOptions; flotilla/transport/tcp/launch.hpp),
// by the names flotilla/transport/tcp.hpp gives it: transport::launch, transport::run_job and the rest.
#include "flotilla/transport/tcp.hpp"
#endif  // FLOTILLA_TRANSPORT_TCPLAUNCH_HPP_INCLUDED
