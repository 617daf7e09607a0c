// cryptd(X): makes any synchronous skcipher, aead or hash asynchronous by
// running its requests on a worker pool (the kernel's crypto/cryptd.c).
// Results equal X's; completions arrive on a worker thread.
//
// Naming differs from the kernel on purpose: the instance's generic name is
// "cryptd(X)", not X, so a lookup of "xts(aes)" never hands out an async
// transform by surprise. Priority is X's + 50, and it is tested with X's vectors.
#include "cryptd_queue.hpp"

#include <blkcrypt/internal/template.hpp>

namespace blkcrypt {
namespace {

constexpr std::size_t kMaxQueued = 1000;  // the kernel's cryptd_max_cpu_qlen

using QueuePtr = std::shared_ptr<CryptdQueue>;

template <class Req>
Status submit(const QueuePtr& q, Req& req, std::function<Status()> op) {
    if (!req.complete) return Status::Invalid;  // nobody to tell the result
    CryptdQueue::Job job;
    job.run = [&req, op = std::move(op)] { req.complete(op()); };
    job.left_backlog = [&req] { req.complete(Status::InProgress); };
    return q->enqueue(std::move(job), (req.flags & kMayBacklog) != 0);
}

// ---- skcipher --------------------------------------------------------------
class CryptdSkcipherTfm final : public SkcipherTfm {
public:
    CryptdSkcipherTfm(std::unique_ptr<SkcipherTfm> inner, QueuePtr q)
        : inner_(std::move(inner)), q_(std::move(q)) {}
    Status setkey(ConstBytes key) override { return inner_->setkey(key); }
    Status set_sector_params(const SectorParams& p) override { return inner_->set_sector_params(p); }
    Status encrypt(SkcipherRequest& req) const override {
        return submit(q_, req, [this, &req] { return inner_->encrypt(req); });
    }
    Status decrypt(SkcipherRequest& req) const override {
        return submit(q_, req, [this, &req] { return inner_->decrypt(req); });
    }

private:
    std::unique_ptr<SkcipherTfm> inner_;
    QueuePtr q_;
};

class CryptdSkcipherAlg final : public SkcipherAlg {
public:
    CryptdSkcipherAlg(AlgInfo info, std::shared_ptr<const Alg> inner, QueuePtr q)
        : SkcipherAlg(std::move(info)), inner_(*this, std::move(inner)), q_(std::move(q)) {
        set_test_name(inner_.info().name);  // tested with X's vectors
    }
    std::unique_ptr<SkcipherTfm> create_tfm() const override {
        return std::make_unique<CryptdSkcipherTfm>(inner_.create_tfm(), q_);
    }

private:
    Spawn<SkcipherAlg> inner_;
    QueuePtr q_;
};

// ---- aead --------------------------------------------------------------------
class CryptdAeadTfm final : public AeadTfm {
public:
    CryptdAeadTfm(std::unique_ptr<AeadTfm> inner, QueuePtr q)
        : inner_(std::move(inner)), q_(std::move(q)) {}
    Status setkey(ConstBytes key) override { return inner_->setkey(key); }
    Status setauthsize(std::size_t n) override { return inner_->setauthsize(n); }
    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        return submit(q_, req, [this, &req, authsize] { return inner_->encrypt(req, authsize); });
    }
    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        return submit(q_, req, [this, &req, authsize] { return inner_->decrypt(req, authsize); });
    }

private:
    std::unique_ptr<AeadTfm> inner_;
    QueuePtr q_;
};

class CryptdAeadAlg final : public AeadAlg {
public:
    CryptdAeadAlg(AlgInfo info, std::shared_ptr<const Alg> inner, QueuePtr q)
        : AeadAlg(std::move(info)), inner_(*this, std::move(inner)), q_(std::move(q)) {
        set_test_name(inner_.info().name);
    }
    std::unique_ptr<AeadTfm> create_tfm() const override {
        return std::make_unique<CryptdAeadTfm>(inner_.create_tfm(), q_);
    }

private:
    Spawn<AeadAlg> inner_;
    QueuePtr q_;
};

// ---- hash (shash in, ahash out) ----------------------------------------------
class CryptdAhashTfm final : public AhashTfm {
public:
    CryptdAhashTfm(std::unique_ptr<AhashTfm> inner, QueuePtr q)
        : inner_(std::move(inner)), q_(std::move(q)) {}
    Status setkey(ConstBytes key) override { return inner_->setkey(key); }
    std::unique_ptr<AhashState> new_state() const override { return inner_->new_state(); }
    Status init(AhashRequest& r) const override { return run(r, &AhashTfm::init); }
    Status update(AhashRequest& r) const override { return run(r, &AhashTfm::update); }
    Status final(AhashRequest& r) const override { return run(r, &AhashTfm::final); }
    Status finup(AhashRequest& r) const override { return run(r, &AhashTfm::finup); }
    Status digest(AhashRequest& r) const override { return run(r, &AhashTfm::digest); }
    Status export_state(const AhashRequest& r, Bytes out) const override {
        return inner_->export_state(r, out);
    }
    Status import_state(AhashRequest& r, ConstBytes in) const override {
        return inner_->import_state(r, in);
    }

private:
    Status run(AhashRequest& r, Status (AhashTfm::*op)(AhashRequest&) const) const {
        return submit(q_, r, [this, &r, op] { return (inner_.get()->*op)(r); });
    }
    std::unique_ptr<AhashTfm> inner_;
    QueuePtr q_;
};

class CryptdAhashAlg final : public AhashAlg {
public:
    CryptdAhashAlg(AlgInfo info, std::shared_ptr<const Alg> inner, QueuePtr q)
        : AhashAlg(std::move(info)), inner_(*this, std::move(inner)), q_(std::move(q)) {
        set_test_name(inner_.info().name);
    }
    std::unique_ptr<AhashTfm> create_tfm() const override {
        return std::make_unique<CryptdAhashTfm>(inner_.create_tfm(), q_);
    }

private:
    Spawn<AhashAlg> inner_;
    QueuePtr q_;
};

class CryptdTemplate final : public Template {
public:
    std::string_view name() const override { return "cryptd"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto inner = reg.lookup_any(name.args()[0].str());
        if (!inner) return make_error(inner.error().status, "cryptd: " + inner.error().message);
        const AlgInfo& in = (*inner)->info();
        if (in.async)
            return make_error(Status::Invalid, "cryptd: '" + in.driver + "' is already asynchronous");
        AlgInfo info = in;
        set_instance_names(info, "cryptd", {inner->get()});
        info.priority = in.priority + 50;
        info.async = true;
        info.module = module;
        std::shared_ptr<Alg> alg;
        switch (in.type) {
        case AlgType::Cipher:
            info.type = AlgType::Skcipher;
            [[fallthrough]];
        case AlgType::Skcipher:
            alg = std::make_shared<CryptdSkcipherAlg>(info, *inner, queue());
            break;
        case AlgType::Aead:
            alg = std::make_shared<CryptdAeadAlg>(info, *inner, queue());
            break;
        case AlgType::Shash:
        case AlgType::Ahash:
            info.type = AlgType::Ahash;
            alg = std::make_shared<CryptdAhashAlg>(info, *inner, queue());
            break;
        }
        return alg;
    }

private:
    QueuePtr queue() const {
        std::lock_guard lk(mu_);
        if (!q_) q_ = std::make_shared<CryptdQueue>(0, kMaxQueued);
        return q_;
    }
    mutable std::mutex mu_;
    mutable QueuePtr q_;
};

}  // namespace

std::shared_ptr<Template> make_cryptd_template() { return std::make_shared<CryptdTemplate>(); }

}  // namespace blkcrypt
