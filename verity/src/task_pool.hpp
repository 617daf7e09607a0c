// TaskPool: a fixed set of threads that run the parts of one job at a time.
// The tree builder hashes a chunk on the pool while it reads the next one.
#pragma once

#include <blkcrypt/status.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt::verity {

class TaskPool {
public:
    // fn(part, worker): worker < threads() identifies the calling thread.
    using PartFn = std::function<Status(std::size_t part, unsigned worker)>;

    // Starts up to `threads` workers: fewer when thread creation fails,
    // possibly none, and then start() runs the job on the calling thread
    // (as worker 0) before returning.
    explicit TaskPool(unsigned threads);
    ~TaskPool();
    TaskPool(const TaskPool&) = delete;
    TaskPool& operator=(const TaskPool&) = delete;

    // Threads started (0: jobs run on the caller). Workers are numbered
    // below max(1, threads()).
    unsigned threads() const noexcept { return static_cast<unsigned>(threads_.size()); }
    // Starts fn on parts [0, parts); returns at once. One job at a time.
    void start(std::size_t parts, PartFn fn);
    // Waits for the job; the first failing part's status.
    Status wait();
    Status run(std::size_t parts, PartFn fn) {
        start(parts, std::move(fn));
        return wait();
    }

private:
    void worker(unsigned index);

    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    PartFn fn_;
    std::size_t parts_ = 0, next_ = 0, finished_ = 0;
    Status status_ = Status::Ok;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

// 0 means every core.
unsigned resolve_threads(unsigned requested) noexcept;

}  // namespace blkcrypt::verity
