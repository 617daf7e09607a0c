#include <blkcrypt/verity/block_hasher.hpp>

#include <blkcrypt/ahash.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <array>
#include <condition_variable>
#include <mutex>

namespace blkcrypt::verity {

namespace {

class ShashContext final : public HashContext {
public:
    ShashContext(ShashDesc desc, std::vector<uint8_t> salt, SaltPlacement place, bool fast)
        : desc_(std::move(desc)), salt_(std::move(salt)), place_(place), fast_(fast) {}

    Status hash(const ConstBytes* blocks, const Bytes* out, std::size_t n) override {
        if (fast_) return desc_.finup_mb({blocks, n}, {out, n});
        for (std::size_t i = 0; i < n; ++i) {
            desc_.init();
            if (place_ == SaltPlacement::Before) {
                desc_.update(salt_);
                if (Status s = desc_.finup(blocks[i], out[i]); s != Status::Ok) return s;
            } else {
                desc_.update(blocks[i]);
                desc_.update(salt_);
                if (Status s = desc_.final(out[i]); s != Status::Ok) return s;
            }
        }
        return Status::Ok;
    }

private:
    ShashDesc desc_;
    std::vector<uint8_t> salt_;
    SaltPlacement place_;
    bool fast_;  // desc_ holds the salted state; finup_mb from it
};

class ShashHasher final : public BlockHasher {
public:
    ShashHasher(Shash tfm, ConstBytes salt, SaltPlacement place)
        : tfm_(std::move(tfm)), salt_(salt.begin(), salt.end()), place_(place) {}

    std::size_t digest_size() const noexcept override { return tfm_.digestsize(); }
    bool is_async() const noexcept override { return false; }
    const std::string& driver() const noexcept override { return tfm_.info().driver; }
    const std::string& generic_name() const noexcept override { return tfm_.info().name; }

    Result<std::unique_ptr<HashContext>> new_context() const override {
        auto desc = tfm_.new_desc();
        if (!desc) return desc.error();
        // The salted-state fast path needs the salt first and an exportable state.
        const bool fast = place_ == SaltPlacement::Before && tfm_.statesize() > 0;
        if (fast) {
            desc->init();
            desc->update(salt_);
        }
        return std::unique_ptr<HashContext>(
            std::make_unique<ShashContext>(std::move(*desc), salt_, place_, fast));
    }

private:
    Shash tfm_;
    std::vector<uint8_t> salt_;
    SaltPlacement place_;
};

// Submits every block as an ahash digest over [salt, block] (or [block,
// salt]) and waits for all completions.
class AhashContext final : public HashContext {
public:
    AhashContext(const Ahash& tfm, std::vector<uint8_t> salt, SaltPlacement place)
        : tfm_(tfm), salt_(std::move(salt)), place_(place) {}

    Status hash(const ConstBytes* blocks, const Bytes* out, std::size_t n) override {
        Status first_error = Status::Ok;
        for (std::size_t done = 0; done < n && first_error == Status::Ok; done += kInFlight) {
            const std::size_t m = std::min(kInFlight, n - done);
            first_error = submit_and_wait(blocks + done, out + done, m);
        }
        return first_error;
    }

private:
    static constexpr std::size_t kInFlight = 64;

    Status submit_and_wait(const ConstBytes* blocks, const Bytes* out, std::size_t n) {
        while (reqs_.size() < n) {
            auto r = tfm_.new_request();
            if (!r) return r.status();
            reqs_.push_back(std::move(*r));
            sgs_.emplace_back();
        }
        {
            std::lock_guard lk(mu_);
            left_ = n;
            error_ = Status::Ok;
        }
        for (std::size_t i = 0; i < n; ++i) {
            auto& sg = sgs_[i];
            SgEntry salt{const_cast<uint8_t*>(salt_.data()), salt_.size()};
            SgEntry data{const_cast<uint8_t*>(blocks[i].data()), blocks[i].size()};
            sg = place_ == SaltPlacement::Before ? std::array{salt, data} : std::array{data, salt};
            AhashRequest& req = reqs_[i];
            req.src = SgList(sg);
            req.nbytes = salt_.size() + blocks[i].size();
            req.result = out[i].first(tfm_.digestsize());
            req.flags = kMayBacklog;
            req.complete = [this](Status s) {
                if (s != Status::InProgress) finish(s);
            };
            const Status s = tfm_.digest(req);
            if (s != Status::InProgress && s != Status::Busy) finish(s);
        }
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return left_ == 0; });
        return error_;
    }

    void finish(Status s) {
        std::lock_guard lk(mu_);
        if (s != Status::Ok && error_ == Status::Ok) error_ = s;
        if (--left_ == 0) cv_.notify_all();
    }

    const Ahash& tfm_;
    std::vector<uint8_t> salt_;
    SaltPlacement place_;
    std::vector<AhashRequest> reqs_;
    std::vector<std::array<SgEntry, 2>> sgs_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::size_t left_ = 0;
    Status error_ = Status::Ok;
};

class AhashHasher final : public BlockHasher {
public:
    AhashHasher(Ahash tfm, ConstBytes salt, SaltPlacement place)
        : tfm_(std::move(tfm)), salt_(salt.begin(), salt.end()), place_(place) {}

    std::size_t digest_size() const noexcept override { return tfm_.digestsize(); }
    bool is_async() const noexcept override { return tfm_.is_async(); }
    const std::string& driver() const noexcept override { return tfm_.info().driver; }
    // cryptd(sha256) computes sha256: the name its record keeps.
    const std::string& generic_name() const noexcept override { return tfm_.computes(); }

    Result<std::unique_ptr<HashContext>> new_context() const override {
        return std::unique_ptr<HashContext>(std::make_unique<AhashContext>(tfm_, salt_, place_));
    }

private:
    Ahash tfm_;
    std::vector<uint8_t> salt_;
    SaltPlacement place_;
};

Error not_a_hash(std::string_view name, const Error& e) {
    return make_error(e.status, "hash algorithm '" + std::string(name) + "': " + e.message);
}

}  // namespace

std::string BlockHasher::algorithm() const { return generic_name(); }

Result<std::shared_ptr<BlockHasher>> BlockHasher::create(Registry& reg, std::string_view name,
                                                         ConstBytes salt, SaltPlacement place,
                                                         HashMode mode) {
    if (mode != HashMode::Async) {
        auto sh = Shash::alloc(reg, name);
        if (sh) {
            if (sh->info().needs_key)
                return make_error(Status::Invalid, "'" + std::string(name) +
                                                       "' needs a key; verity takes an unkeyed hash");
            return std::shared_ptr<BlockHasher>(std::make_shared<ShashHasher>(std::move(*sh), salt, place));
        }
        if (mode == HashMode::Sync) return not_a_hash(name, sh.error());
    }
    auto ah = Ahash::alloc(reg, name);
    if (!ah) return not_a_hash(name, ah.error());
    if (ah->info().needs_key)
        return make_error(Status::Invalid, "'" + std::string(name) +
                                               "' needs a key; verity takes an unkeyed hash");
    return std::shared_ptr<BlockHasher>(std::make_shared<AhashHasher>(std::move(*ah), salt, place));
}

}  // namespace blkcrypt::verity
