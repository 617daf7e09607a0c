// The asynchronous request contract shared by skcipher, aead and ahash.
//
// submit (encrypt/decrypt/digest...) returns:
//   Ok          done synchronously; the completion is NOT called
//   InProgress  accepted; the completion is called once with the final status
//   Busy        queue full. With kMayBacklog the request is still accepted and
//               the completion is first called with InProgress when it leaves
//               the backlog, then once more with the final status. Without
//               kMayBacklog it was rejected: resubmit later.
//   other       rejected at once (Invalid, NoKey, ...)
// CryptoWait turns all of that into a blocking call.
#pragma once

#include <blkcrypt/status.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>

namespace blkcrypt {

enum RequestFlag : unsigned {
    kMayBacklog = 1u << 0,  // accept into a backlog when the queue is full
};

using Completion = std::function<void(Status)>;

// Waits for one request at a time; reusable after wait() returns.
class CryptoWait {
public:
    Completion callback();
    // Give it what submit returned; returns the operation's final status.
    // The request must carry kMayBacklog: without it, Busy means rejected
    // and no completion will ever come.
    Status wait(Status submitted);

private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    Status result_ = Status::Ok;
};

}  // namespace blkcrypt
