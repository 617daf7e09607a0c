#include <blkcrypt/request.hpp>

namespace blkcrypt {

Completion CryptoWait::callback() {
    {
        std::lock_guard lk(mu_);
        done_ = false;
    }
    return [this](Status s) {
        // InProgress only says a backlogged request started; wait for the end.
        if (s == Status::InProgress) return;
        std::lock_guard lk(mu_);
        result_ = s;
        done_ = true;
        cv_.notify_all();
    };
}

Status CryptoWait::wait(Status submitted) {
    if (submitted != Status::InProgress && submitted != Status::Busy) return submitted;
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return done_; });
    done_ = false;
    return result_;
}

}  // namespace blkcrypt
