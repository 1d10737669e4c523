#pragma once
// The local launcher of TCP jobs (launch(), run_job(), LaunchOptions; flotilla/transport/tcp/launch.hpp),
// by the names flotilla/transport/tcp.hpp gives it: transport::launch, transport::run_job and the rest.
#include "flotilla/transport/tcp.hpp"
