// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Checkpoint sets in a directory: periodic saves, rotation, resume from the newest set that
// verifies (and what it skips), bit-identical continuation of an interrupted run, and saves that
// fail without harming what was saved before.
#include <doctest/doctest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/quiet_fit.hpp"
#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"

namespace unit_checkpoints {

using namespace flotilla;

namespace {

using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, Flatten, Dense<12>, Tanh, Dropout<20>, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Adam>;
using Ring = policy::Synchronous<>;
using SyncPs = policy::Synchronous<topology::ParameterServer>;
using AsyncPs = policy::Asynchronous<topology::ParameterServer>;

TrainerOptions<M> setup(std::size_t workers, std::size_t servers, std::uint64_t seed = 5) {
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.01;
  o.schedule = schedule::Cosine{.total = 200};  // the schedule's position must survive a resume too
  o.batch_size = 10;
  o.workers = workers;
  o.servers = servers;
  o.seed = seed;
  return o;
}

using flotilla_test::quiet;

/// A fresh, empty directory under the temporary directory.
std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_test_checkpoints_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

template <class T>
bool bitwise_equal(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

/// Trains 2 epochs without a break; then again, stopped after `stop_after` updates with sets every
/// 4 updates and none at exit (as if killed), and resumed by a trainer of another seed from the
/// newest set. Both must end with the same parameters, bit for bit, and the same step.
template <class P>
void check_resume_equals_uninterrupted(std::size_t workers, std::size_t servers, const std::string& name) {
  const auto data = flotilla_test::blobs<float>(250, 3);  // 250: a partial last batch
  Trainer<M, P> whole(setup(workers, servers));
  whole.fit(data, nullptr, quiet(2));

  const auto dir = fresh_dir(name);
  {
    Trainer<M, P> first(setup(workers, servers));
    FitOptions f = quiet(2);
    f.checkpoints.directory = dir;
    f.checkpoints.every_steps = 4;
    f.checkpoints.at_exit = false;
    f.max_steps = 11;
    first.fit(data, nullptr, f);
    REQUIRE(first.step() == 11);
  }
  Trainer<M, P> resumed(setup(workers, servers, /*seed=*/77));  // load must replace the seed too
  FitOptions f = quiet(2);
  f.checkpoints.directory = dir;
  f.checkpoints.resume = true;
  f.checkpoints.at_exit = false;
  std::ostringstream log;
  f.log = &log;
  resumed.fit(data, nullptr, f);
  CHECK(log.str().find("resuming from step 8") != std::string::npos);
  CHECK(resumed.step() == whole.step());
  CHECK(resumed.epoch() == 2);
  CHECK(bitwise_equal(std::as_const(resumed).parameters(), std::as_const(whole).parameters()));
  std::filesystem::remove_all(dir);
}

/// Writes `bytes` over the file (to damage it).
void overwrite(const std::filesystem::path& p, const std::vector<char>& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> contents(const std::filesystem::path& p) {
  std::vector<char> b(std::filesystem::file_size(p));
  std::ifstream(p, std::ios::binary).read(b.data(), static_cast<std::streamsize>(b.size()));
  return b;
}

}  // namespace

TEST_CASE("checkpoints: periodic sets are named by step and rotated to the last M") {
  const auto data = flotilla_test::blobs<float>(100, 1);  // 10 updates per epoch
  const auto dir = fresh_dir("rotation");
  Trainer<M> t(setup(1, 1));
  FitOptions f = quiet(2);
  f.checkpoints.directory = dir;
  f.checkpoints.every_steps = 3;
  f.checkpoints.keep = 2;
  t.fit(data, nullptr, f);
  // Saved at 3, 6, ..., 18 and at exit (20); the last two remain.
  CHECK(names_in(dir) == std::vector<std::string>{"step-000000000018.worker.ckpt", "step-000000000020.worker.ckpt"});
  CHECK(checkpoint::Reader(checkpoint::set_file(dir, 18, "worker")).u64("step") == 18);

  // By time: a period shorter than any update gives a set after every update.
  const auto timed = fresh_dir("rotation_timed");
  Trainer<M> by_time(setup(1, 1));
  FitOptions g = quiet(1);
  g.checkpoints.directory = timed;
  g.checkpoints.every_seconds = 1e-9;
  g.checkpoints.keep = 0;
  by_time.fit(data, nullptr, g);
  CHECK(checkpoint::list_sets(timed).size() == 10);
  std::filesystem::remove_all(timed);

  // Parameter servers: a file per server besides worker 0's, each rotated by its writer.
  const auto ps_dir = fresh_dir("rotation_ps");
  Trainer<M, SyncPs> ps(setup(2, 2));
  f.checkpoints.directory = ps_dir;
  f.checkpoints.every_steps = 2;
  f.checkpoints.keep = 1;
  f.epochs = 1;  // 5 updates of 2 x 10 samples
  ps.fit(data, nullptr, f);
  // The servers save before worker 0 does: when they rotate, the newest complete set is still
  // step 4's, and each keeps its file of it besides its newest; worker 0 then completes step 5's.
  // (Had worker 0 failed to save step 5, the set of step 4 would be whole.)
  CHECK(names_in(ps_dir) == std::vector<std::string>{"step-000000000004.server-0-of-2.ckpt",
                                                     "step-000000000004.server-1-of-2.ckpt",
                                                     "step-000000000005.server-0-of-2.ckpt",
                                                     "step-000000000005.server-1-of-2.ckpt",
                                                     "step-000000000005.worker.ckpt"});
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(ps_dir);
}

TEST_CASE("checkpoints: a run interrupted and resumed equals the uninterrupted run, bit for bit") {
  SUBCASE("one worker") { check_resume_equals_uninterrupted<Ring>(1, 1, "resume_1"); }
  SUBCASE("two workers, ring") { check_resume_equals_uninterrupted<Ring>(2, 1, "resume_ring2"); }
  SUBCASE("two workers, two synchronous parameter servers") { check_resume_equals_uninterrupted<SyncPs>(2, 2, "resume_ps"); }
  SUBCASE("one worker, an asynchronous parameter server") { check_resume_equals_uninterrupted<AsyncPs>(1, 1, "resume_async"); }
}

TEST_CASE("checkpoints: resume takes the newest set that verifies and says what it skipped") {
  const auto data = flotilla_test::blobs<float>(100, 2);
  const auto dir = fresh_dir("skip");
  Trainer<M, SyncPs> t(setup(2, 2));
  FitOptions f = quiet(1);
  f.checkpoints.directory = dir;
  f.checkpoints.every_steps = 1;
  f.checkpoints.keep = 0;  // keep all: sets of steps 1..5
  t.fit(data, nullptr, f);
  REQUIRE(checkpoint::list_sets(dir).size() == 5);

  // Step 5: a flipped byte in worker 0's file; step 4: server 1's file truncated; step 3: server
  // 0's file missing; step 6 (newer than all): a file of another model.
  auto w5 = contents(checkpoint::set_file(dir, 5, "worker"));
  w5[w5.size() / 2] ^= 0x40;
  overwrite(checkpoint::set_file(dir, 5, "worker"), w5);
  auto s4 = contents(checkpoint::set_file(dir, 4, "server-1-of-2"));
  s4.resize(s4.size() - 7);
  overwrite(checkpoint::set_file(dir, 4, "server-1-of-2"), s4);
  std::filesystem::remove(checkpoint::set_file(dir, 3, "server-0-of-2"));
  using Other = Model<Sequential<Input<1, 6, 6>, Flatten, Dense<3>>, SoftmaxCrossEntropy, optim::Adam>;
  Trainer<Other>().save(checkpoint::set_file(dir, 6, "worker"));

  Trainer<M, SyncPs> r(setup(2, 2, 9));
  std::ostringstream log;
  const auto report = r.resume_from(dir, &log);
  REQUIRE(report.step.has_value());
  CHECK(*report.step == 2);
  CHECK(r.step() == 2);
  REQUIRE(report.skipped.size() >= 4);
  const auto reason_for = [&](std::uint64_t step) {
    std::string all;
    for (const auto& s : report.skipped)
      if (s.step == step) all += s.file.string() + ": " + s.reason + "\n";
    return all;
  };
  CHECK(reason_for(6).find("another model") != std::string::npos);
  CHECK(reason_for(6).find("server-0-of-2") != std::string::npos);  // the foreign step has no servers' files either
  CHECK(reason_for(5).find("step-000000000005.worker.ckpt") != std::string::npos);
  CHECK(reason_for(5).find("checksum mismatch") != std::string::npos);
  CHECK(reason_for(5).find("record") != std::string::npos);
  CHECK(reason_for(4).find("truncated") != std::string::npos);
  CHECK(reason_for(3).find("no file for part server-0-of-2") != std::string::npos);
  CHECK(log.str().find("resuming from step 2") != std::string::npos);
  CHECK(log.str().find("skipped " + checkpoint::set_file(dir, 5, "worker").string()) != std::string::npos);

  // A resumed fit goes on from step 2 with those shards: one more epoch of 5 updates.
  f.checkpoints.every_steps = 0;
  f.checkpoints.at_exit = false;
  r.fit(data, nullptr, f);  // the rest of epoch 1: its last 3 updates
  CHECK(r.step() == 5);
  CHECK(r.epoch() == 1);

  // Nothing usable: nothing changes, and the report says so.
  const auto empty = fresh_dir("skip_empty");
  Trainer<M> fresh(setup(1, 1));
  std::ostringstream log2;
  CHECK_FALSE(fresh.resume_from(empty, &log2).step.has_value());
  CHECK(log2.str().find("no complete checkpoint set") != std::string::npos);
  CHECK(fresh.step() == 0);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(empty);
}

TEST_CASE("checkpoints: a save that fails (disk full) keeps the previous set and training goes on") {
  const auto data = flotilla_test::blobs<float>(100, 4);
  const auto dir = fresh_dir("full");
  Trainer<M> t(setup(1, 1));
  FitOptions f = quiet(1);
  f.checkpoints.directory = dir;
  t.fit(data, nullptr, f);  // the set of step 10, at exit
  const auto good = contents(checkpoint::set_file(dir, 10, "worker"));

  // A file size limit makes write(2) fail with EFBIG part way, as a full disk fails with ENOSPC.
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 200;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  f.checkpoints.every_steps = 5;
  std::ostringstream log;
  f.log = &log;
  // Saves at 15 and 20 fail; fit() trains to the end and then says so. (EFBIG is no full disk:
  // nothing is removed to make room.)
  std::optional<UnsavedCheckpointsError> unsaved;
  try {
    t.fit(data, nullptr, f);
  } catch (const UnsavedCheckpointsError& e) {
    unsaved = e;
  }
  const std::size_t steps_then = t.step();
  // Asked not to fail at the end, fit() returns (saves at 25 and 30 fail), having logged the same.
  f.checkpoints.fail_at_end_on_save_failure = false;
  std::ostringstream quiet_end;
  f.log = &quiet_end;
  CHECK_NOTHROW(t.fit(data, nullptr, f));
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);

  CHECK(t.step() == 30);
  CHECK(t.checkpoint_failures().size() == 4);
  CHECK(quiet_end.str().find("checkpoint: the checkpoint sets of steps 25, 30 could not be saved in " + dir.string()) !=
        std::string::npos);
  CHECK(steps_then == 20);
  CHECK(t.history().size() == 3);
  REQUIRE(unsaved.has_value());
  CHECK(unsaved->steps() == std::vector<std::uint64_t>{15, 20});
  CHECK(std::string(unsaved->what()).find("the checkpoint sets of steps 15, 20 could not be saved in " + dir.string()) !=
        std::string::npos);
  CHECK(log.str().find("checkpoint: the checkpoint sets of steps 15, 20 could not be saved in " + dir.string() + " (2 failed saves; " +
                       checkpoint::set_file(dir, 15, "worker").string()) != std::string::npos);
  const auto failures = t.checkpoint_failures();
  REQUIRE(failures.size() == 4);
  CHECK(failures[0].find(checkpoint::set_file(dir, 15, "worker").string()) != std::string::npos);
  CHECK(failures[0].find("cannot write") != std::string::npos);
  CHECK(failures[0].find("previous checkpoint is unchanged") != std::string::npos);
  CHECK(names_in(dir) == std::vector<std::string>{"step-000000000010.worker.ckpt"});  // no temporary file left
  CHECK(contents(checkpoint::set_file(dir, 10, "worker")) == good);
  Trainer<M> r(setup(1, 1));
  CHECK(r.resume_from(dir).step == std::optional<std::uint64_t>(10));
  std::filesystem::remove_all(dir);
}

/// Synchronous ring training in which worker 1 fails before its update number `fail_at` + 1.
struct FailingSynchronous {
  static constexpr std::string_view name = "synchronous, failing";
  using topology = topology::Ring;
  static constexpr bool reduce_gradients_in_backward = true;
  std::uint64_t fail_at = 6;
  template <class Context>
  void step(Context& ctx) {
    if (ctx.rank() == 1 && ctx.step() == fail_at) throw std::runtime_error("worker 1 fails on purpose");
    ctx.apply_optimizer();
  }
};

TEST_CASE("checkpoints: a job that fails saves the last completed update at exit") {
  // Worker 1 fails in its 7th update; worker 0 leaves by the job's abort with 6 updates done (or
  // 7, if it applied its own before the abort reached it: both are completed updates). What it
  // saves must be exactly what a clean run has after that many updates.
  const auto data = flotilla_test::blobs<float>(200, 6);
  const auto dir = fresh_dir("failure");
  Trainer<M, FailingSynchronous> t(setup(2, 1));
  FitOptions f = quiet(1);
  f.checkpoints.directory = dir;
  CHECK_THROWS_WITH_AS(t.fit(data, nullptr, f), doctest::Contains("fails on purpose"), std::runtime_error);
  const auto sets = checkpoint::list_sets(dir);
  REQUIRE(sets.size() == 1);
  const std::uint64_t saved = sets.begin()->first;
  CHECK((saved == 6 || saved == 7));
  Trainer<M, Ring> clean(setup(2, 1));
  FitOptions g = quiet(1);
  g.max_steps = saved;
  clean.fit(data, nullptr, g);
  Trainer<M, Ring> r(setup(2, 1));
  REQUIRE(r.resume_from(dir).step == std::optional<std::uint64_t>(saved));
  CHECK(bitwise_equal(std::as_const(r).parameters(), std::as_const(clean).parameters()));
  std::filesystem::remove_all(dir);
}

TEST_CASE("checkpoints: unusable policy values are refused by name") {
  const auto data = flotilla_test::blobs<float>(20, 1);
  Trainer<M> t(setup(1, 1));
  FitOptions f = quiet(1);
  const auto dir = fresh_dir("bad");
  f.checkpoints.directory = dir;
  f.checkpoints.every_seconds = -1;
  CHECK_THROWS_WITH_AS(t.fit(data, nullptr, f), doctest::Contains("every_seconds"), ConfigError);
  std::filesystem::remove_all(dir);
  f.checkpoints.every_seconds = 0;
  f.checkpoints.directory.clear();
  f.checkpoints.resume = true;
  CHECK_THROWS_WITH_AS(t.fit(data, nullptr, f), doctest::Contains("need a directory"), ConfigError);
  f.checkpoints.resume = false;
  f.checkpoints.directory = "/proc/flotilla-cannot-create-this";
  CHECK_THROWS_WITH_AS(t.fit(data, nullptr, f), doctest::Contains("cannot create"), ConfigError);
}

TEST_CASE("checkpoints: when a set is due (the rule both trainers share)") {
  CheckpointPolicy p;
  p.directory = "unused";
  p.every_steps = 4;
  SUBCASE("by steps, counted from the start of the run, never twice for one step") {
    detail::CheckpointClock c(p, 0);
    CHECK_FALSE(c.timed());
    CHECK_FALSE(c.due(3));
    CHECK(c.due(4));
    CHECK(c.due(8));
    c.mark_saved(8);
    CHECK(c.saved(8));
    CHECK_FALSE(c.due(8));
    CHECK_FALSE(c.due_at_exit(8));
    CHECK(c.due_at_exit(9));
    p.at_exit = false;
    CHECK_FALSE(c.due_at_exit(9));
    // Without `resume`, a call that starts past step 0 has saved nothing yet.
    CHECK(detail::CheckpointClock(p, 12).due(12));
  }
  SUBCASE("the set a run resumed from is not saved again") {
    p.resume = true;
    const detail::CheckpointClock c(p, 12);
    CHECK_FALSE(c.due(12));
    CHECK(c.due_by_steps(12));
    CHECK_FALSE(c.due_at_exit(12));
  }
  SUBCASE("by time, from the last save") {
    p.every_steps = 0;
    p.every_seconds = 0.3;  // far above the time between two of these lines, even on a loaded machine
    detail::CheckpointClock c(p, 0);
    CHECK(c.timed());
    CHECK_FALSE(c.due(1));  // just started
    std::this_thread::sleep_for(std::chrono::milliseconds(350));
    CHECK(c.due_by_time());
    CHECK(c.due(1));
    c.mark_saved(1);
    CHECK_FALSE(c.due_by_time());
    CHECK_FALSE(c.due(2));
  }
}

TEST_CASE("checkpoints: failed saves are kept and logged") {
  detail::CheckpointFailures failures;
  std::ostringstream log;
  failures.note(8, "stage 1: disk full", &log);
  failures.note(4, "stage 0: read-only", nullptr);
  CHECK(failures.list() == std::vector<std::string>{"stage 1: disk full", "stage 0: read-only"});
  CHECK(log.str() == "flotilla: checkpoint: save failed, training goes on: stage 1: disk full\n");
  CHECK(failures.steps_since(0) == std::vector<std::uint64_t>{4, 8});
  CHECK(failures.summary(2, "d").empty());
  CHECK(failures.summary(1, "d") == "the checkpoint set of step 4 could not be saved in d (1 failed save; stage 0: read-only)");
}

namespace {

/// A CheckpointError as Writer::commit throws it when write(2) fails with `err`.
CheckpointError write_failure(const std::filesystem::path& file, int err) {
  return CheckpointError(file.string() + ": cannot write: " + std::strerror(err), std::error_code(err, std::generic_category()));
}

}  // namespace

TEST_CASE("checkpoints: a full disk loses the writer's oldest files, never the newest complete set") {
  // Sets of a job with one server: complete at 10, 20 and 30; worker 0 alone at 5 and the
  // server alone at 40 (incomplete: either old or still being written).
  const auto dir = fresh_dir("room");
  const std::vector<std::string> parts = checkpoint::trainer_parts(1);
  for (const std::uint64_t step : {10, 20, 30}) {
    for (const auto& part : parts) std::ofstream(checkpoint::set_file(dir, step, part)) << "x";
  }
  std::ofstream(checkpoint::set_file(dir, 5, "worker")) << "x";
  std::ofstream(checkpoint::set_file(dir, 40, "server-0-of-1")) << "x";
  const auto target = checkpoint::set_file(dir, 40, "worker");

  // A disk that holds 7 files: worker 0's save of step 40 finds room once two files are gone.
  const auto disk_of = [&](std::size_t capacity) {
    return [&dir, &target, capacity] {
      if (names_in(dir).size() >= capacity) throw write_failure(target, ENOSPC);
      std::ofstream(target) << "x";
    };
  };
  std::ostringstream log;
  auto removed = checkpoint::write_making_room(dir, 40, "worker", parts, disk_of(7), &log);
  CHECK(removed == std::vector<std::filesystem::path>{checkpoint::set_file(dir, 5, "worker"), checkpoint::set_file(dir, 10, "worker")});
  CHECK(std::filesystem::exists(target));
  CHECK(log.str().find("checkpoint: the disk is full; removed " + checkpoint::set_file(dir, 5, "worker").string() +
                       " (older than the newest complete set, step 30) to make room for step 40") != std::string::npos);
  // The server's files (another writer's) all stay.
  for (const std::uint64_t step : {10, 20, 30, 40}) CHECK(std::filesystem::exists(checkpoint::set_file(dir, step, "server-0-of-1")));

  // Step 40 is complete now. Server 0 saving step 50 on a disk with no room at all removes its own
  // files older than 40, then gives up with the disk's error; step 40's set is whole.
  const auto server_target = checkpoint::set_file(dir, 50, "server-0-of-1");
  const auto full = [&] { throw write_failure(server_target, ENOSPC); };
  try {
    checkpoint::write_making_room(dir, 50, "server-0-of-1", parts, full, nullptr);
    FAIL("a disk with no room must fail the save");
  } catch (const CheckpointError& e) {
    CHECK(checkpoint::disk_full(e));
  }
  CHECK(names_in(dir) == std::vector<std::string>{"step-000000000020.worker.ckpt", "step-000000000030.worker.ckpt",
                                                 "step-000000000040.server-0-of-1.ckpt", "step-000000000040.worker.ckpt"});
  CHECK(checkpoint::newest_complete_step(dir, parts) == std::optional<std::uint64_t>(40));

  // Any other failure (EFBIG, a read-only directory) removes nothing. Nor does a quota (EDQUOT)
  // when no complete set is older than this part's files.
  const auto too_big = [&] { throw write_failure(target, EFBIG); };
  CHECK_THROWS_AS(checkpoint::write_making_room(dir, 60, "worker", parts, too_big, nullptr), CheckpointError);
  const auto quota = [&] { throw write_failure(target, EDQUOT); };
  const auto only = fresh_dir("room_only");
  std::ofstream(checkpoint::set_file(only, 7, "worker")) << "x";
  CHECK_THROWS_AS(checkpoint::write_making_room(only, 8, "worker", parts, quota, nullptr), CheckpointError);
  CHECK(names_in(only) == std::vector<std::string>{"step-000000000007.worker.ckpt"});
  CHECK(names_in(dir).size() == 4);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(only);
}

TEST_CASE("checkpoints: rotation keeps the newest complete set while another writer's saves fail") {
  // A pipeline of two stages whose stage 1 could save only the set of step 2: stage 0 went on
  // saving 4, 6 and 8. Keeping its newest 3 must not cost the only complete set its stage-0 file.
  const auto dir = fresh_dir("rotation_complete");
  const auto parts = checkpoint::pipeline_parts(2);
  for (const auto& part : parts) std::ofstream(checkpoint::set_file(dir, 2, part)) << "x";
  for (const std::uint64_t step : {4, 6, 8}) std::ofstream(checkpoint::set_file(dir, step, parts[0])) << "x";
  CHECK(checkpoint::rotate(dir, parts[0], 3, parts).empty());
  CHECK(checkpoint::newest_complete_step(dir, parts) == std::optional<std::uint64_t>(2));
  // Once a newer set is complete, the older one goes as `keep` says.
  std::ofstream(checkpoint::set_file(dir, 8, parts[1])) << "x";
  CHECK(checkpoint::rotate(dir, parts[0], 3, parts) == std::vector<std::filesystem::path>{checkpoint::set_file(dir, 2, parts[0])});
  std::filesystem::remove_all(dir);
}

namespace {

/// Runs `scenario` in a child process with a tmpfs of `bytes` mounted at `dir` in a mount
/// namespace of its own (so that the mount is the child's alone and goes with it). Returns what
/// the scenario wrote, or nothing when the namespace or the mount cannot be made (not root, no
/// CAP_SYS_ADMIN), after saying so. The child uses no doctest: it reports lines the parent checks.
template <class Scenario>
std::optional<std::string> on_small_disk(const std::filesystem::path& dir, std::size_t bytes, Scenario scenario) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const ::pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    const std::string options = "size=" + std::to_string(bytes);
    if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      out = std::string("skip: cannot mount a tmpfs in a mount namespace of its own: ") + std::strerror(errno);
    } else {
      try {
        out = scenario();
      } catch (const std::exception& e) {
        out = std::string("exception: ") + e.what();
      }
    }
    for (std::size_t done = 0; done < out.size();) {
      const ::ssize_t k = ::write(fds[1], out.data() + done, out.size() - done);
      if (k <= 0) break;
      done += static_cast<std::size_t>(k);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (::ssize_t k; (k = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(k));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  if (out.rfind("skip: ", 0) == 0) {
    MESSAGE(out << " (running as root is needed); the real full-disk test is skipped");
    return std::nullopt;
  }
  return out;
}

}  // namespace

TEST_CASE("checkpoints: on a real full disk, old sets make room and unsaved sets fail the run at the end") {
  const auto data = flotilla_test::blobs<float>(100, 4);  // 10 updates per epoch
  // One worker file's size, on a disk with room.
  const auto sizing = fresh_dir("sizing");
  {
    Trainer<M> t(setup(1, 1));
    FitOptions f = quiet(1);
    f.max_steps = 1;
    f.checkpoints.directory = sizing;
    t.fit(data, nullptr, f);
  }
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t file_pages = (std::filesystem::file_size(checkpoint::set_file(sizing, 1, "worker")) + page - 1) / page;
  std::filesystem::remove_all(sizing);
  REQUIRE(file_pages >= 2);  // so that a disk of 2 * file_pages + 1 pages holds two files, not three

  const auto dir = fresh_dir("full_disk");
  // Room for two sets, with `keep` 3: every save from the third on must remove the oldest first.
  const auto two = on_small_disk(dir, (2 * file_pages + 1) * page, [&] {
    Trainer<M> t(setup(1, 1));
    FitOptions f = quiet(2);
    std::ostringstream log;
    f.log = &log;
    f.checkpoints.directory = dir;
    f.checkpoints.every_steps = 5;
    f.checkpoints.keep = 3;
    t.fit(data, nullptr, f);  // sets at 5, 10, 15, 20
    std::string out = "failures " + std::to_string(t.checkpoint_failures().size()) + "\nfiles";
    for (const auto& name : names_in(dir)) out += " " + name;
    Trainer<M> r(setup(1, 1));
    out += "\nresumes from " + std::to_string(r.resume_from(dir).step.value_or(0)) + "\nlog " + log.str();
    return out;
  });
  if (two) {
    INFO(*two);
    CHECK(two->find("failures 0\n") != std::string::npos);
    CHECK(two->find("files step-000000000015.worker.ckpt step-000000000020.worker.ckpt\n") != std::string::npos);
    CHECK(two->find("resumes from 20\n") != std::string::npos);
    CHECK(two->find("the disk is full; removed " + checkpoint::set_file(dir, 5, "worker").string() +
                    " (older than the newest complete set, step 10) to make room for step 15") != std::string::npos);
    CHECK(two->find("removed " + checkpoint::set_file(dir, 10, "worker").string()) != std::string::npos);
  }

  // Room for one set: the first stays, every later save fails, training goes on to the end, and
  // fit() then says which sets are missing.
  const auto one = on_small_disk(dir, (file_pages + 1) * page, [&] {
    Trainer<M> t(setup(1, 1));
    FitOptions f = quiet(2);
    std::ostringstream log;
    f.log = &log;
    f.checkpoints.directory = dir;
    f.checkpoints.every_steps = 5;
    std::string out;
    try {
      t.fit(data, nullptr, f);
      out = "fit returned\n";
    } catch (const UnsavedCheckpointsError& e) {
      out = std::string("unsaved: ") + e.what() + "\n";
    }
    out += "step " + std::to_string(t.step()) + ", epochs " + std::to_string(t.history().size()) + "\nfiles";
    for (const auto& name : names_in(dir)) out += " " + name;
    Trainer<M> r(setup(1, 1));
    out += "\nresumes from " + std::to_string(r.resume_from(dir).step.value_or(0)) + "\nlog " + log.str();
    return out;
  });
  if (one) {
    INFO(*one);
    CHECK(one->find("unsaved: the checkpoint sets of steps 10, 15, 20 could not be saved in " + dir.string()) != std::string::npos);
    CHECK(one->find("No space left on device") != std::string::npos);
    CHECK(one->find("training completed, and the sets saved before are as they were") != std::string::npos);
    CHECK(one->find("step 20, epochs 2\n") != std::string::npos);
    CHECK(one->find("files step-000000000005.worker.ckpt\n") != std::string::npos);
    CHECK(one->find("resumes from 5\n") != std::string::npos);
    CHECK(one->find("checkpoint: save failed, training goes on: " + checkpoint::set_file(dir, 10, "worker").string()) !=
          std::string::npos);
    CHECK(one->find("checkpoint: the checkpoint sets of steps 10, 15, 20 could not be saved in") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("checkpoints: only set files count; temporary and foreign files are left alone") {
  const auto dir = fresh_dir("names");
  for (const char* name : {"step-000000000001.worker.ckpt.tmp-123", "notes.txt", "step-12.worker.ckpt",
                           "step-00000000000x.worker.ckpt", "step-000000000003..ckpt"})
    std::ofstream(dir / name) << "x";
  std::ofstream(dir / "step-000000000002.server-0-of-1.ckpt") << "x";
  const auto sets = checkpoint::list_sets(dir);
  REQUIRE(sets.size() == 1);
  CHECK(sets.begin()->first == 2);
  CHECK(sets.begin()->second.count("server-0-of-1") == 1);
  CHECK(checkpoint::rotate(dir, "server-0-of-1", 1).empty());
  CHECK(names_in(dir).size() == 6);
  // A temporary file of another process (a writer killed mid-save) goes with its part's rotation.
  const auto removed = checkpoint::rotate(dir, "worker", 1);
  REQUIRE(removed.size() == 1);
  CHECK(removed[0].filename() == "step-000000000001.worker.ckpt.tmp-123");
  CHECK(names_in(dir).size() == 5);
  CHECK(checkpoint::set_file(dir, 42, "worker").filename() == "step-000000000042.worker.ckpt");
  std::filesystem::remove_all(dir);
}

}  // namespace unit_checkpoints
