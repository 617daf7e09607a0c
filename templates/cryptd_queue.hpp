// CryptdQueue: the worker pool behind cryptd(...). A bounded queue of jobs
// plus a backlog for requests submitted with kMayBacklog while it is full,
// drained by worker threads, so completions always run on another thread.
//
// A job is plain data (two function pointers and what they work on) and the
// queue is a ring sized once, at first use: queuing a request allocates
// nothing. Only the backlog (a full queue, and the caller allowed waiting)
// grows on the heap.
#pragma once

#include <blkcrypt/status.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt {

class CryptdQueue {
public:
    struct Job {
        void (*run)(const Job&) = nullptr;           // does the work, completes the request
        void (*left_backlog)(const Job&) = nullptr;  // tells the submitter InProgress (may be null)
        const void* owner = nullptr;                 // what run works with (a cryptd transform)
        void* req = nullptr;                         // the request
        unsigned op = 0;                             // which of the owner's operations
        std::size_t arg = 0;                         // its argument (aead: the authsize)
    };

    // threads == 0: one per core (at least two).
    CryptdQueue(std::size_t threads, std::size_t max_queued);
    ~CryptdQueue();  // finishes every accepted job, then joins
    CryptdQueue(const CryptdQueue&) = delete;
    CryptdQueue& operator=(const CryptdQueue&) = delete;

    // InProgress: queued. Busy: queue full; backlogged if may_backlog, else
    // rejected (the job will not run). NoMem: no worker thread could be
    // started, or no room for the ring (the job will not run).
    Status enqueue(const Job& job, bool may_backlog);
    // Worker threads running (0 before the first request).
    std::size_t threads() const;

private:
    void worker();
    bool start_locked();
    void push_locked(const Job& job);

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Job> ring_;  // max_queued_ slots once started
    std::size_t head_ = 0, count_ = 0;
    // Slots promised to jobs leaving the backlog: told InProgress first, then
    // queued, and no other job may take their place meanwhile.
    std::size_t reserved_ = 0;
    std::deque<Job> backlog_;
    std::vector<std::thread> threads_;
    std::size_t nthreads_;
    std::size_t max_queued_;
    bool stop_ = false;
};

}  // namespace blkcrypt
