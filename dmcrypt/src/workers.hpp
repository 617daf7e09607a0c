// WorkerPool: a crypt target's worker threads and its fixed set of slots,
// one per bio in flight (dm-crypt's crypt workqueue plus its mempools).
//
// A slot is taken when a bio is submitted (acquire blocks while none is free:
// the target's backpressure), put on the run queue whenever its bio has work
// to do (just submitted, or an async crypto request finished), and released
// when the bio is done. A slot is on the run queue at most once, so the queue
// (sized for every slot) never overflows and schedule() never blocks: a
// crypto completion callback can always hand its bio back.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt::dm {

class WorkerPool {
public:
    using RunFn = std::function<void(std::size_t slot)>;

    // Starts `threads` workers calling run(slot) for each scheduled slot;
    // fewer, possibly none, when thread creation fails (see threads()).
    WorkerPool(unsigned threads, std::size_t slots, RunFn run);
    ~WorkerPool();  // waits for the bios in flight, then joins the workers
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    // A free slot; its bio counts as in flight until retire(). On one of
    // this pool's workers (a completion callback submitting more) it runs
    // queued work while waiting, so such callbacks cannot starve the pool.
    std::size_t acquire();
    void schedule(std::size_t slot);
    // The slot may take a new bio (its bio is finished but still counts).
    void release(std::size_t slot);
    // The bio's completion callback has returned.
    void retire();
    // Wait until no bio is in flight.
    void drain();
    unsigned threads() const noexcept { return static_cast<unsigned>(threads_.size()); }

private:
    void worker();
    std::size_t pop_locked();

    RunFn run_;
    std::mutex mu_;
    std::condition_variable work_cv_;  // run queue not empty (or stopping)
    std::condition_variable room_cv_;  // a slot became free
    std::condition_variable idle_cv_;  // nothing in flight
    std::vector<std::size_t> free_;    // free slots, used as a stack
    std::vector<std::size_t> ring_;    // run queue: ring of slot numbers
    std::size_t head_ = 0, queued_ = 0;
    std::size_t in_flight_ = 0;
    std::size_t helpers_waiting_ = 0;  // workers blocked in acquire()
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace blkcrypt::dm
