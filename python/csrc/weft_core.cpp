// weft_core.cpp — the communicator, Work objects, launching and completing
// operations (the collectives themselves are in weft_colls.cpp).
#include "weft_core.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

namespace weft_torch {

namespace {

constexpr const char* kIdKey = "weft_unique_id";
constexpr const char* kIdError = "error:";

std::runtime_error weft_error(const char* call, weft_status_t st, const std::string& msg) {
  return std::runtime_error(
      std::string("weft: ") + call + ": " + weft_status_string(st) + (msg.empty() ? "" : ": ") +
      msg);
}

} // namespace

// ---- Work

WorkWeft::WorkWeft(
    Core* core,
    std::weak_ptr<Core> owner,
    int rank,
    c10d::OpType type,
    const char* name,
    std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      core_(core),
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

std::vector<at::Tensor> WorkWeft::result() {
  return outputs_;
}

void WorkWeft::request_done(weft_status_t status) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (status != WEFT_SUCCESS && status_ == WEFT_SUCCESS) {
    status_ = status;
    // The message is Weft's own: which rank, peer and call failed.
    exception_ = std::make_exception_ptr(weft_error(name_, status, core_->last_error()));
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
  finish = nullptr;
  completed_ = true;
  keep.clear();
  keep_extra.reset();
  bool has_future = future_.defined();
  lock.unlock();
  cv_.notify_all();
  if (recordFunctionEndCallback_) {
    recordFunctionEndCallback_();
    recordFunctionEndCallback_ = nullptr;
  }
  if (has_future)
    core_->enqueue_future(this);
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
  if (timeout == kNoTimeout) {
    // Drive the requests here: no hand-over from the progress thread.
    if (auto core = owner_.lock())
      core->drive(this);
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

// ---- Core

std::shared_ptr<Core> Core::create(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout) {
  weft_unique_id_t id;
  if (rank == 0) {
    weft_status_t st = weft_get_unique_id(&id);
    std::string err = st == WEFT_SUCCESS ? "" : weft_init_last_error();
    std::vector<uint8_t> value(
        reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id));
    if (st != WEFT_SUCCESS) // tell the others rather than leave them waiting
      value.assign(kIdError, kIdError + strlen(kIdError)), value.insert(value.end(),
                                                                     err.begin(), err.end());
    store->set(kIdKey, value);
    if (st != WEFT_SUCCESS)
      throw weft_error("weft_get_unique_id", st, err);
  } else {
    std::vector<uint8_t> value = store->get(kIdKey);
    std::string text(value.begin(), value.end());
    TORCH_CHECK(
        text.rfind(kIdError, 0) != 0, "weft: rank 0 could not create the unique id: ",
        text.substr(strlen(kIdError)));
    TORCH_CHECK(
        value.size() == sizeof(id), "weft: the unique id from the store has ", value.size(),
        " bytes, expected ", sizeof(id));
    memcpy(&id, value.data(), sizeof(id));
  }
  weft_config_t config = WEFT_CONFIG_INIT;
  config.timeout_seconds = timeout.count() > 0 ? timeout.count() / 1000.0 : 0.0;
  config.progress_thread = 1; // Work objects complete from it
  weft_comm_t comm = nullptr;
  weft_status_t st = weft_comm_init_rank(&comm, size, id, rank, &config);
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_init_rank", st, weft_init_last_error());
  return std::make_shared<Core>(comm, rank, size);
}

Core::Core(weft_comm_t comm, int rank, int size)
    : comm_(comm), rank_(rank), size_(size), done_(std::make_shared<Completions>()) {
  // The thread holds its own reference: it may outlive the Core.
  done_thread_ = std::thread([done = done_] { done->run(); });
}

Core::~Core() {
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  {
    std::lock_guard<std::mutex> lock(done_->mu);
    done_->stop = true; // it still marks what is queued, then ends
  }
  done_->cv.notify_all();
  // The last reference may go in a future callback on the completion
  // thread: it then goes on with the Completions it holds, not with us.
  if (done_thread_.get_id() == std::this_thread::get_id())
    done_thread_.detach();
  else
    done_thread_.join();
  weft_comm_destroy(comm_);
}

std::string Core::last_error() const {
  const char* msg = weft_comm_last_error(comm_);
  return msg ? msg : "";
}

void Core::on_done(void* arg, weft_status_t status) {
  auto* r = static_cast<Request*>(arg);
  r->finished.store(true);
  r->work->request_done(status);
}

void Core::reap() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->req && it->finished.load())
      weft_test(&it->req); // finished: frees it
    it = it->req ? std::next(it) : pending_.erase(it);
  }
}

void Core::drive(WorkWeft* work) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : pending_)
    if (r.work.get() == work && r.req)
      weft_wait(&r.req); // its callback runs in here, or ran already
}

c10::intrusive_ptr<WorkWeft> Core::launch(
    c10d::OpType type,
    const char* name,
    std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keep,
    const std::vector<Post>& posts,
    bool group,
    std::function<void()> finish,
    std::shared_ptr<void> keep_extra) {
  auto work = c10::make_intrusive<WorkWeft>(
      this, weak_from_this(), rank_, type, name, std::move(outputs));
  work->keep = std::move(keep);
  work->keep_extra = std::move(keep_extra);
  work->finish = std::move(finish);
  work->remaining_ = static_cast<int>(posts.size());
  std::lock_guard<std::mutex> lock(mu_);
  reap();
  std::vector<Request*> started;
  weft_status_t st = WEFT_SUCCESS;
  if (group)
    weft_group_start();
  for (const Post& post : posts) {
    Request& r = pending_.emplace_back();
    r.work = work;
    st = post(comm_, &r.req);
    if (st != WEFT_SUCCESS) {
      pending_.pop_back();
      break;
    }
    started.push_back(&r);
  }
  if (group)
    weft_group_end();
  if (st != WEFT_SUCCESS && started.empty()) {
    work->remaining_ = 0;
    throw weft_error(name, st, last_error());
  }
  // Posts that never started count as done, with the error.
  for (size_t k = started.size(); k < posts.size(); k++)
    work->request_done(st);
  for (Request* r : started) {
    if (!r->req) // nothing to move (zero bytes): done already
      on_done(r, WEFT_SUCCESS);
    else
      weft_request_on_complete(r->req, on_done, r);
  }
  if (posts.empty()) {
    work->remaining_ = 1;
    work->request_done(WEFT_SUCCESS);
  }
  return work;
}

void Core::enqueue_future(WorkWeft* work) {
  done_->push(work);
}

void Completions::push(WorkWeft* work) {
  {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(c10::intrusive_ptr<WorkWeft>::unsafe_reclaim_from_nonowning(work));
  }
  cv.notify_one();
}

void Completions::run() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return stop || !queue.empty(); });
    if (queue.empty() && stop)
      return;
    auto work = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    work->mark_future(); // its callbacks run here: no Weft lock, no GIL
    work.reset();	 // may be the group's last reference: ~Core, on this thread
    lock.lock();
  }
}

std::string Core::dump(const std::string& path) {
  weft_status_t st = weft_comm_dump(comm_, path.empty() ? nullptr : path.c_str());
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_dump", st, last_error());
  return path;
}

void Core::dump_on_timeout(const char* what) {
  const char* dir = getenv("WEFT_TRACE_DIR");
  if (!dir || !*dir)
    return;
  // Not under mu_: the progress thread keeps the operation going, and the
  // recorder shows it in flight.
  if (weft_comm_dump(comm_, nullptr) == WEFT_SUCCESS)
    fprintf(stderr, "weft: rank %d: %s: Work.wait timed out; flight recorder written to %s\n",
            rank_, what, dir);
}

std::string Core::describe() {
  std::lock_guard<std::mutex> lock(mu_);
  char* json = nullptr;
  weft_status_t st = weft_comm_describe(comm_, &json);
  if (st != WEFT_SUCCESS)
    throw weft_error("weft_comm_describe", st, last_error());
  std::string out(json);
  weft_describe_free(json);
  return out;
}

} // namespace weft_torch
