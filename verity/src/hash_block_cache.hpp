// Verified hash blocks kept in memory, bounded, oldest out first. Being in
// the cache is what "verified" means: an evicted block is read and checked
// again on its next use, so nothing unverified is ever trusted.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace blkcrypt::verity {

class HashBlockCache {
public:
    using Block = std::shared_ptr<const std::vector<uint8_t>>;

    explicit HashBlockCache(std::size_t capacity) : capacity_(capacity ? capacity : 1) {}

    Block find(uint64_t key) {
        std::lock_guard lk(mu_);
        auto it = map_.find(key);
        return it == map_.end() ? nullptr : it->second;
    }

    void insert(uint64_t key, Block b) {
        std::lock_guard lk(mu_);
        if (!map_.emplace(key, std::move(b)).second) return;
        order_.push_back(key);
        while (map_.size() > capacity_) {
            map_.erase(order_.front());
            order_.pop_front();
        }
    }

private:
    std::mutex mu_;
    std::size_t capacity_;
    std::unordered_map<uint64_t, Block> map_;
    std::deque<uint64_t> order_;
};

}  // namespace blkcrypt::verity
