#include "fsverity_hasher.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <thread>

namespace blkcrypt::verity::detail {
namespace {

constexpr std::size_t kBatch = 32;               // blocks per finup_mb call
constexpr std::size_t kMinBlocksPerThread = 16;  // below this a thread costs more than it saves

}  // namespace

SaltedHasher::SaltedHasher(ShashDesc desc, ConstBytes padded_salt)
    : desc_(std::move(desc)),
      padded_salt_(padded_salt.begin(), padded_salt.end()),
      ds_(desc_.digestsize()) {}

Result<SaltedHasher> SaltedHasher::create(const Shash& h, ConstBytes padded_salt) {
    auto desc = h.new_desc();
    if (!desc) return desc.error();
    SaltedHasher s(std::move(desc).value(), padded_salt);
    Status st = s.desc_.init();
    if (st == Status::Ok) st = s.desc_.update(padded_salt);
    if (st != Status::Ok)
        return make_error(st, "fs-verity: cannot start " + h.info().driver + ": " + to_string(st));
    return s;
}

Status SaltedHasher::hash_slow(ConstBytes block, Bytes out) {
    Status s = desc_.init();
    if (s == Status::Ok) s = desc_.update(padded_salt_);
    if (s == Status::Ok) s = desc_.finup(block, out);
    // Leave the salted state behind, as the fast path does.
    if (s == Status::Ok) s = desc_.init();
    if (s == Status::Ok) s = desc_.update(padded_salt_);
    return s;
}

Status SaltedHasher::hash_blocks(ConstBytes data, std::size_t bs, Bytes out) {
    const std::size_t n = data.size() / bs;
    std::array<ConstBytes, kBatch> in;
    std::array<Bytes, kBatch> dst;
    for (std::size_t i = 0; i < n;) {
        const std::size_t k = std::min(kBatch, n - i);
        if (multi_) {
            for (std::size_t j = 0; j < k; ++j) {
                in[j] = data.subspan((i + j) * bs, bs);
                dst[j] = out.subspan((i + j) * ds_, ds_);
            }
            const Status s = desc_.finup_mb({in.data(), k}, {dst.data(), k});
            if (s == Status::Ok) {
                i += k;
                continue;
            }
            if (s != Status::Unsupported) return s;
            multi_ = false;
        }
        for (std::size_t j = 0; j < k; ++j) {
            const Status s = hash_slow(data.subspan((i + j) * bs, bs), out.subspan((i + j) * ds_, ds_));
            if (s != Status::Ok) return s;
        }
        i += k;
    }
    return Status::Ok;
}

Result<LeafHasher> LeafHasher::create(const Shash& h, ConstBytes padded_salt, unsigned threads) {
    LeafHasher l;
    for (unsigned i = 0; i < std::max(1u, threads); ++i) {
        auto s = SaltedHasher::create(h, padded_salt);
        if (!s) return s.error();
        l.hashers_.push_back(std::move(s).value());
    }
    return l;
}

Status LeafHasher::hash_blocks(ConstBytes data, std::size_t bs, Bytes out) {
    const std::size_t n = data.size() / bs;
    const std::size_t ds = out.size() / std::max<std::size_t>(n, 1);
    const std::size_t workers =
        std::clamp<std::size_t>(n / kMinBlocksPerThread, 1, hashers_.size());
    if (workers == 1) return hashers_[0].hash_blocks(data, bs, out);

    std::vector<Status> status(workers, Status::Ok);
    auto part = [&](std::size_t w) {
        const std::size_t lo = n * w / workers, hi = n * (w + 1) / workers;
        status[w] = hashers_[w].hash_blocks(data.subspan(lo * bs, (hi - lo) * bs), bs,
                                            out.subspan(lo * ds, (hi - lo) * ds));
    };
    std::vector<std::thread> pool;
    std::size_t started = 1;
    try {
        pool.reserve(workers - 1);
        for (; started < workers; ++started) pool.emplace_back(part, started);
    } catch (const std::exception&) {
        // No thread to be had: the caller does the rest itself.
    }
    for (std::size_t w = started; w < workers; ++w) part(w);
    part(0);
    for (auto& t : pool) t.join();
    for (Status s : status)
        if (s != Status::Ok) return s;
    return Status::Ok;
}

}  // namespace blkcrypt::verity::detail
