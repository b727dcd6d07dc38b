// weft_core.cpp — Work objects, lanes (a communicator and its pending
// requests), the completion thread, and the Core's life (the collectives
// are in weft_colls.cpp, alltoall and barriers in weft_p2p.cpp, point to
// point in weft_match.cpp).
#include <Python.h> // first, as Python asks

#include "weft_core.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>

#include <ATen/Parallel.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "weft_match.hpp"

namespace weft_torch {

namespace {

constexpr const char* kIdKey = "weft_unique_id";
constexpr const char* kIdError = "error:";

// What rank 0 puts in the store: the unique id, then the group's first
// sequence number (c10d's, agreed as Gloo agrees it: rank 0 draws it).
struct Welcome {
  weft_unique_id_t id;
  uint64_t seq;
};

} // namespace

// "weft: barrier: timeout on rank 0: barrier seq 2: no progress for 1.0 s
// ...": Weft's own sentence names the rank first.
std::runtime_error weft_error(const char* call, weft_status_t st, const std::string& msg) {
  const char* glue = msg.empty() ? "" : msg.rfind("rank ", 0) == 0 ? " on " : ": ";
  return std::runtime_error(std::string("weft: ") + call + ": " + weft_status_string(st) + glue +
                            msg);
}

const char* profiling_title(c10d::OpType type) {
  using T = c10d::OpType;
  switch (type) {
    case T::BROADCAST:
      return "weft:broadcast";
    case T::ALLREDUCE:
    case T::ALLREDUCE_COALESCED:
      return "weft:all_reduce";
    case T::REDUCE:
      return "weft:reduce";
    case T::ALLGATHER:
    case T::ALLGATHER_COALESCED:
      return "weft:all_gather";
    case T::_ALLGATHER_BASE:
      return "weft:all_gather_into_tensor";
    case T::GATHER:
      return "weft:gather";
    case T::SCATTER:
      return "weft:scatter";
    case T::REDUCE_SCATTER:
      return "weft:reduce_scatter";
    case T::_REDUCE_SCATTER_BASE:
      return "weft:reduce_scatter_tensor";
    case T::ALLTOALL_BASE:
    case T::ALLTOALL:
      return "weft:all_to_all";
    case T::SEND:
      return "weft:send";
    case T::RECV:
      return "weft:recv";
    case T::RECVANYSOURCE:
      return "weft:recvAnySource";
    case T::BARRIER:
      return "weft:barrier";
    default:
      return "weft:unknown";
  }
}

// ---- Work

WorkWeft::WorkWeft(
    std::shared_ptr<Completions> done,
    std::weak_ptr<Core> owner,
    int rank,
    c10d::OpType type,
    const char* title,
    const char* name,
    const std::vector<at::Tensor>& inputs,
    std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, title, inputs),
      done_(std::move(done)),
      owner_(std::move(owner)),
      name_(name),
      outputs_(std::move(outputs)) {}

WorkWeft::~WorkWeft() = default;

bool WorkWeft::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool WorkWeft::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr WorkWeft::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

int WorkWeft::sourceRank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(source_ >= 0, "weft: ", name_, ": sourceRank() is known once a receive from any "
              "rank has completed");
  return source_;
}

std::vector<at::Tensor> WorkWeft::result() {
  return outputs_;
}

void WorkWeft::request_done(weft_status_t status, Lane* lane) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (status != WEFT_SUCCESS && status_ == WEFT_SUCCESS) {
    status_ = status;
    // The message is Weft's own: which rank, peer and call failed.
    exception_ = std::make_exception_ptr(weft_error(name_, status, lane->last_error()));
  }
  if (--remaining_ > 0)
    return;
  if (finish && !exception_) {
    try {
      finish();
    } catch (...) {
      exception_ = std::current_exception();
    }
  }
  complete_locked(lock);
}

void WorkWeft::finish_now(std::exception_ptr error, int source) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (completed_)
    return;
  if (error && !exception_)
    exception_ = error;
  source_ = source;
  complete_locked(lock);
}

// With mutex_ held (released here): the Work is complete.
void WorkWeft::complete_locked(std::unique_lock<std::mutex>& lock) {
  finish = nullptr;
  // The profiler's event ends before anyone can see the Work complete (as
  // c10d::Work::finish does): a waiter may leave the profiler's scope at
  // once, and an event ended after that is a use after free in torch.
  if (recordFunctionEndCallback_) {
    recordFunctionEndCallback_();
    recordFunctionEndCallback_ = nullptr;
  }
  completed_ = true;
  keep.clear();
  keep_extra.reset();
  bool has_future = future_.defined();
  lock.unlock();
  cv_.notify_all();
  if (has_future) // its callbacks may call Weft or Python: not here
    done_->push([work = c10::intrusive_ptr<WorkWeft>::unsafe_reclaim_from_nonowning(this)] {
      work->mark_future();
    });
}

void WorkWeft::mark_future() {
  if (exception_)
    future_->setError(exception_);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

c10::intrusive_ptr<c10::ivalue::Future> WorkWeft::getFuture() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (future_.defined())
    return future_;
  future_ = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()));
  // Finished before anyone asked: nobody else will mark it.
  if (completed_) {
    lock.unlock();
    mark_future();
  }
  return future_;
}

bool WorkWeft::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout && lane_) {
    // Drive the requests here: no hand-over from the progress thread.
    if (auto core = owner_.lock())
      lane_->drive(this);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    TORCH_CHECK(
        completed_ || !owner_.expired(),
        "weft: ", name_, ": the process group was destroyed before the operation completed");
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    lock.unlock();
    if (auto core = owner_.lock())
      core->dump_on_timeout(name_);
    TORCH_CHECK(false, "weft: ", name_, ": not complete after ", timeout.count(),
                " ms (Work.wait timeout); the operation goes on");
  }
  if (exception_)
    std::rethrow_exception(exception_);
  return true;
}

// ---- Lane

Lane::~Lane() {
  {
    std::lock_guard<std::mutex> lock(mu);
    bool active = false;
    for (auto& r : pending_)
      active |= r.req && !r.finished.load();
    if (active) // nobody will wait for them any more: fail them now
      weft_comm_abort(comm_);
    for (auto& r : pending_)
      if (r.req)
        weft_wait(&r.req);
    pending_.clear();
  }
  weft_comm_destroy(comm_);
}

std::string Lane::last_error() const {
  const char* msg = weft_comm_last_error(comm_);
  return msg ? msg : "";
}

void Lane::on_done(void* arg, weft_status_t status) {
  auto* r = static_cast<Request*>(arg);
  r->finished.store(true);
  if (r->work)
    r->work->request_done(status, r->lane);
  if (r->then)
    r->then(status);
}

void Lane::reap() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->req && it->finished.load())
      weft_test(&it->req); // finished: frees it
    it = it->req ? std::next(it) : pending_.erase(it);
  }
}

weft_status_t Lane::shrink(const std::vector<int>& exclude, bool abort, weft_comm_t* out) {
  std::lock_guard<std::mutex> lock(mu);
  reap();
  return weft_comm_shrink(
      comm_, exclude.empty() ? nullptr : exclude.data(), static_cast<int>(exclude.size()),
      abort ? WEFT_SHRINK_ABORT : WEFT_SHRINK_DEFAULT, out);
}

void Lane::drive(WorkWeft* work) {
  if (!drive_)
    return; // the progress thread drives it
  std::lock_guard<std::mutex> lock(mu);
  for (auto& r : pending_)
    if (r.work.get() == work && r.req)
      weft_wait(&r.req); // its callback runs in here, or ran already
}

void Lane::launch(const c10::intrusive_ptr<WorkWeft>& work, const Launch& l) {
  work->lane_ = this;
  work->remaining_ = static_cast<int>(l.posts.size());
  std::lock_guard<std::mutex> lock(mu);
  reap();
  std::vector<Request*> started;
  weft_status_t st = WEFT_SUCCESS;
  if (l.group)
    weft_group_start();
  for (const Post& post : l.posts) {
    Request& r = pending_.emplace_back();
    r.work = work;
    r.lane = this;
    st = post(comm_, &r.req);
    if (st != WEFT_SUCCESS) {
      pending_.pop_back();
      break;
    }
    started.push_back(&r);
  }
  if (l.group)
    weft_group_end();
  if (st != WEFT_SUCCESS && started.empty()) {
    work->remaining_ = 0;
    throw weft_error(l.name, st, last_error());
  }
  // Posts that never started count as done, with the error.
  for (size_t k = started.size(); k < l.posts.size(); k++)
    work->request_done(st, this);
  for (Request* r : started) {
    if (r->req && l.timeout.count() > 0)
      weft_request_set_timeout(r->req, l.timeout.count() / 1000.0);
    if (!r->req) // nothing to move (zero bytes): done already
      on_done(r, WEFT_SUCCESS);
    else
      weft_request_on_complete(r->req, on_done, r);
  }
  if (l.posts.empty()) {
    work->remaining_ = 1;
    work->request_done(WEFT_SUCCESS, this);
  }
}

void Lane::post(
    const Post& post,
    std::function<void(weft_status_t)> then,
    c10::intrusive_ptr<WorkWeft> work) {
  if (work) {
    work->lane_ = this;
    work->remaining_ = 1;
  }
  std::lock_guard<std::mutex> lock(mu);
  reap();
  Request& r = pending_.emplace_back();
  r.then = std::move(then);
  r.work = std::move(work);
  r.lane = this;
  weft_status_t st = post(comm_, &r.req);
  if (st != WEFT_SUCCESS) {
    pending_.pop_back();
    throw weft_error("point to point", st, last_error());
  }
  if (!r.req)
    on_done(&r, WEFT_SUCCESS);
  else
    weft_request_on_complete(r.req, on_done, &r);
}

// ---- the completion thread

namespace {
thread_local Completions* running_jobs_of = nullptr; // a completion thread's own
} // namespace

void Completions::push(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu);
  queue.push_back(std::move(job));
  if (idle == 0 && threads < kMaxThreads && !stop) {
    threads++;
    std::thread([self = shared_from_this()] { self->run(); }).detach();
  }
  cv.notify_one();
}

void Completions::run() {
  running_jobs_of = this;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    idle++;
    bool woke = cv.wait_for(lock, std::chrono::seconds(kIdleSeconds),
                            [&] { return stop || !queue.empty(); });
    idle--;
    if (queue.empty() && (stop || (!woke && threads > 1)))
      break;
    if (queue.empty())
      continue;
    auto job = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    job(); // no Weft lock, no GIL: a future's callbacks run here
    job = nullptr; // may hold the group's last reference: ~Core, on this thread
    lock.lock();
  }
  threads--;
  gone.notify_all();
}

void Completions::shut() {
  std::unique_lock<std::mutex> lock(mu);
  stop = true; // they still run what is queued, then end
  cv.notify_all();
  int self = running_jobs_of == this ? 1 : 0;
  gone.wait(lock, [&] { return threads <= self; });
}

// ---- Core

namespace {

// Rank 0 makes the id and the first sequence number and tells the others;
// a failure is told too, rather than leaving them waiting.
Welcome agree(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  Welcome w{};
  if (rank == 0) {
    weft_status_t st = weft_get_unique_id(&w.id);
    std::string err = st == WEFT_SUCCESS ? "" : weft_init_last_error();
    w.seq = 1 + std::random_device()() % (1u << 30);
    std::vector<uint8_t> value(
        reinterpret_cast<uint8_t*>(&w), reinterpret_cast<uint8_t*>(&w) + sizeof(w));
    if (st != WEFT_SUCCESS)
      value.assign(kIdError, kIdError + strlen(kIdError)), value.insert(value.end(),
                                                                     err.begin(), err.end());
    store->set(kIdKey, value);
    if (st != WEFT_SUCCESS)
      throw weft_error("weft_get_unique_id", st, err);
    return w;
  }
  std::vector<uint8_t> value = store->get(kIdKey);
  std::string text(value.begin(), value.end());
  TORCH_CHECK(
      text.rfind(kIdError, 0) != 0, "weft: rank 0 could not create the unique id: ",
      text.substr(strlen(kIdError)));
  TORCH_CHECK(
      value.size() == sizeof(w), "weft: the unique id from the store has ", value.size(),
      " bytes, expected ", sizeof(w));
  memcpy(&w, value.data(), sizeof(w));
  return w;
}

} // namespace

std::shared_ptr<Core> Core::create(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout) {
  Welcome w = agree(store, rank);
  weft_config_t config = WEFT_CONFIG_INIT;
  config.timeout_seconds = timeout.count() > 0 ? timeout.count() / 1000.0 : 0.0;
  config.progress_thread = 1; // Work objects complete from it
  // WEFT_WAIT=auto: this rank's compute threads beside its peers' decide
  // whether a wait spins or sleeps (the cores are oversubscribed otherwise).
  config.compute_threads = at::get_num_threads();
  weft_comm_t comm = nullptr;
  weft_status_t st = weft_comm_init_rank(&comm, size, w.id, rank, &config);
  memset(&w.id, 0, sizeof(w.id)); // it holds the job's key
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_init_rank", st, weft_init_last_error());
  return std::make_shared<Core>(comm, rank, size, w.seq);
}

Core::Core(weft_comm_t comm, int rank, int size, uint64_t seq)
    : rank_(rank),
      size_(size),
      seq_(seq),
      done_(std::make_shared<Completions>()),
      lane_(std::make_unique<Lane>(comm, true)) {
  // Point to point on a communicator of its own (weft_match.hpp): every
  // rank splits here, at the same point, as a collective must be called.
  weft_comm_t p2p = nullptr;
  weft_status_t st = weft_comm_split(comm, 0, rank, &p2p);
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_split", st, lane_->last_error());
  match_ = std::make_shared<Match>(this, p2p);
}


Core::~Core() {
  // It waits for the completion threads, and one of them may be freeing a
  // Work whose tensors must take the GIL to drop their Python objects: a
  // thread that holds it (the group dropped from Python, or a future's
  // callback run inline) lets it go meanwhile, or neither goes on.
  PyThreadState* gil = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  match_->shut(); // fails what waits, frees its lane
  match_.reset();
  lane_.reset(); // fails what is pending, destroys the communicator
  // The last reference may go in a future callback on a completion
  // thread: it then goes on with the Completions it holds, not with us.
  done_->shut();
  if (gil)
    PyEval_RestoreThread(gil);
}

c10::intrusive_ptr<WorkWeft> Core::make_work(const Launch& l) {
  auto work = c10::make_intrusive<WorkWeft>(done_, weak_from_this(), rank_, l.type,
                                            l.title ? l.title : profiling_title(l.type),
                                            l.name, l.inputs, l.outputs);
  work->keep = l.keep;
  work->keep_extra = l.keep_extra;
  work->finish = l.finish;
  return work;
}

c10::intrusive_ptr<WorkWeft> Core::launch(Launch l) {
  auto work = make_work(l);
  std::lock_guard<std::recursive_mutex> order(order_mu_);
  seq_++; // every collective, as Gloo counts
  lane_->launch(work, l);
  return work;
}

std::string Core::dump(const std::string& path) {
  weft_status_t st = weft_comm_dump(lane_->comm(), path.empty() ? nullptr : path.c_str());
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_dump", st, lane_->last_error());
  return path;
}

void Core::dump_on_timeout(const char* what) {
  const char* dir = getenv("WEFT_TRACE_DIR");
  if (!dir || !*dir)
    return;
  // Not under mu_: the progress thread keeps the operation going, and the
  // recorder shows it in flight.
  if (weft_comm_dump(lane_->comm(), nullptr) == WEFT_SUCCESS)
    fprintf(stderr, "weft: rank %d: %s: Work.wait timed out; flight recorder written to %s\n",
            rank_, what, dir);
}

std::string Core::describe() {
  std::lock_guard<std::mutex> lock(lane_->mu);
  char* json = nullptr;
  weft_status_t st = weft_comm_describe(lane_->comm(), &json);
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_describe", st, lane_->last_error());
  std::string out(json);
  weft_describe_free(json);
  return out;
}

void Core::revoke() {
  weft_comm_revoke(lane_->comm());
  match_->revoke();
}

std::shared_ptr<Core> Core::shrink(
    const std::vector<int64_t>& exclude,
    bool abort,
    std::vector<int64_t>& parent_ranks) {
  std::vector<int> ex(exclude.begin(), exclude.end());
  weft_comm_t nc = nullptr;
  weft_status_t st = lane_->shrink(ex, abort, &nc);
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_shrink", st, lane_->last_error());
  if (!nc)
    return nullptr;
  int r = 0, n = 0;
  weft_comm_rank(nc, &r);
  weft_comm_size(nc, &n);
  // Each member's rank in the parent, and the new group's sequence number:
  // its new rank 0's, as at creation one rank's number is everyone's.
  std::vector<int64_t> map(2 * static_cast<size_t>(n));
  map[2 * static_cast<size_t>(r)] = rank_;
  map[2 * static_cast<size_t>(r) + 1] = static_cast<int64_t>(seq_.load());
  st = weft_allgather(WEFT_IN_PLACE, map.data(), 2, WEFT_INT64, nc);
  if (st != WEFT_SUCCESS) {
    std::string msg = weft_comm_last_error(nc);
    weft_comm_destroy(nc);
    throw weft_error("weft_comm_shrink", st, msg);
  }
  parent_ranks.clear();
  for (int i = 0; i < n; i++)
    parent_ranks.push_back(static_cast<int32_t>(map[2 * static_cast<size_t>(i)]));
  return std::make_shared<Core>(nc, r, n, static_cast<uint64_t>(map[1]));
}

std::vector<std::pair<int64_t, std::string>> Core::failed_ranks() {
  int count = 0;
  weft_comm_failed_ranks(lane_->comm(), nullptr, 0, &count);
  std::vector<weft_failed_rank_t> all(static_cast<size_t>(count > 0 ? count : 1));
  weft_comm_failed_ranks(lane_->comm(), all.data(), static_cast<int>(all.size()), &count);
  std::vector<std::pair<int64_t, std::string>> out;
  for (int i = 0; i < count && i < static_cast<int>(all.size()); i++)
    out.emplace_back(all[i].rank, weft_rank_failure_string(all[i].how));
  return out;
}

} // namespace weft_torch
