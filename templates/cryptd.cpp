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

// Queues op of the transform `self` on req: a job of plain data (no
// std::function to build, nothing allocated). Self::run_op(req, op, arg) runs
// on a worker and its status goes to req.complete.
template <class Self, class Req>
Status submit(const QueuePtr& q, const Self* self, Req& req, unsigned op, std::size_t arg = 0) {
    if (!req.complete) return Status::Invalid;  // nobody to tell the result
    CryptdQueue::Job job;
    job.run = [](const CryptdQueue::Job& j) {
        auto& r = *static_cast<Req*>(j.req);
        r.complete(static_cast<const Self*>(j.owner)->run_op(r, j.op, j.arg));
    };
    job.left_backlog = [](const CryptdQueue::Job& j) { static_cast<Req*>(j.req)->complete(Status::InProgress); };
    job.owner = self;
    job.req = &req;
    job.op = op;
    job.arg = arg;
    return q->enqueue(job, (req.flags & kMayBacklog) != 0);
}

enum Op : unsigned { kEncrypt, kDecrypt };

// ---- skcipher --------------------------------------------------------------
class CryptdSkcipherTfm final : public SkcipherTfm {
public:
    CryptdSkcipherTfm(std::unique_ptr<SkcipherTfm> inner, QueuePtr q)
        : inner_(std::move(inner)), q_(std::move(q)) {}
    Status setkey(ConstBytes key) override { return inner_->setkey(key); }
    Status set_sector_params(const SectorParams& p) override { return inner_->set_sector_params(p); }
    Status encrypt(SkcipherRequest& req) const override { return submit(q_, this, req, kEncrypt); }
    Status decrypt(SkcipherRequest& req) const override { return submit(q_, this, req, kDecrypt); }
    Status run_op(SkcipherRequest& req, unsigned op, std::size_t) const {
        return op == kEncrypt ? inner_->encrypt(req) : inner_->decrypt(req);
    }

private:
    std::unique_ptr<SkcipherTfm> inner_;
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
        return submit(q_, this, req, kEncrypt, authsize);
    }
    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        return submit(q_, this, req, kDecrypt, authsize);
    }
    Status run_op(AeadRequest& req, unsigned op, std::size_t authsize) const {
        return op == kEncrypt ? inner_->encrypt(req, authsize) : inner_->decrypt(req, authsize);
    }

private:
    std::unique_ptr<AeadTfm> inner_;
    QueuePtr q_;
};

// ---- hash (shash in, ahash out) ----------------------------------------------
class CryptdAhashTfm final : public AhashTfm {
public:
    CryptdAhashTfm(std::unique_ptr<AhashTfm> inner, QueuePtr q)
        : inner_(std::move(inner)), q_(std::move(q)) {}
    Status setkey(ConstBytes key) override { return inner_->setkey(key); }
    std::unique_ptr<AhashState> new_state() const override { return inner_->new_state(); }
    Status init(AhashRequest& r) const override { return submit(q_, this, r, kInit); }
    Status update(AhashRequest& r) const override { return submit(q_, this, r, kUpdate); }
    Status final(AhashRequest& r) const override { return submit(q_, this, r, kFinal); }
    Status finup(AhashRequest& r) const override { return submit(q_, this, r, kFinup); }
    Status digest(AhashRequest& r) const override { return submit(q_, this, r, kDigest); }
    Status export_state(const AhashRequest& r, Bytes out) const override {
        return inner_->export_state(r, out);
    }
    Status import_state(AhashRequest& r, ConstBytes in) const override {
        return inner_->import_state(r, in);
    }
    Status run_op(AhashRequest& r, unsigned op, std::size_t) const {
        switch (op) {
        case kInit: return inner_->init(r);
        case kUpdate: return inner_->update(r);
        case kFinal: return inner_->final(r);
        case kFinup: return inner_->finup(r);
        default: return inner_->digest(r);
        }
    }

private:
    enum HashOp : unsigned { kInit, kUpdate, kFinal, kFinup, kDigest };
    std::unique_ptr<AhashTfm> inner_;
    QueuePtr q_;
};

// ---- the instance -------------------------------------------------------------
// cryptd(X) as a Base (SkcipherAlg, AeadAlg, AhashAlg): X is its spawn, as a
// Base too (an shash comes as a synchronous ahash), and Tfm runs X's
// transform on the queue.
template <class Base, class Tfm>
class CryptdAlg final : public Base {
public:
    CryptdAlg(AlgInfo info, std::shared_ptr<const Alg> inner, QueuePtr q)
        : Base(std::move(info)), inner_(*this, std::move(inner)), q_(std::move(q)) {
        this->set_test_name(inner_.info().name);  // tested with X's vectors
    }
    decltype(std::declval<const Base&>().create_tfm()) create_tfm() const override {
        return std::make_unique<Tfm>(inner_.create_tfm(), q_);
    }

private:
    Spawn<Base> inner_;
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
            alg = std::make_shared<CryptdAlg<SkcipherAlg, CryptdSkcipherTfm>>(info, *inner, queue());
            break;
        case AlgType::Aead:
            alg = std::make_shared<CryptdAlg<AeadAlg, CryptdAeadTfm>>(info, *inner, queue());
            break;
        case AlgType::Shash:
        case AlgType::Ahash:
            info.type = AlgType::Ahash;
            alg = std::make_shared<CryptdAlg<AhashAlg, CryptdAhashTfm>>(info, *inner, queue());
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
