// CryptdQueue: the worker pool behind cryptd(...). A bounded queue of jobs
// plus a backlog for requests submitted with kMayBacklog while it is full,
// drained by worker threads, so completions always run on another thread.
#pragma once

#include <blkcrypt/status.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt {

class CryptdQueue {
public:
    struct Job {
        std::function<void()> run;
        std::function<void()> left_backlog;  // tells the submitter: InProgress
    };

    // threads == 0: one per core (at least two).
    CryptdQueue(std::size_t threads, std::size_t max_queued);
    ~CryptdQueue();  // finishes every accepted job, then joins
    CryptdQueue(const CryptdQueue&) = delete;
    CryptdQueue& operator=(const CryptdQueue&) = delete;

    // InProgress: queued. Busy: queue full; backlogged if may_backlog, else
    // rejected (the job will not run). NoMem: no worker thread could be
    // started (the job will not run).
    Status enqueue(Job job, bool may_backlog);
    // Worker threads running (0 before the first request).
    std::size_t threads() const;

private:
    void worker();
    bool start_locked();

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Job> queue_;
    std::deque<Job> backlog_;
    std::vector<std::thread> threads_;
    std::size_t nthreads_;
    std::size_t max_queued_;
    bool stop_ = false;
};

}  // namespace blkcrypt
