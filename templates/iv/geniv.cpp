#include <blkcrypt/internal/geniv.hpp>

#include <blkcrypt/secure_buffer.hpp>

#include <array>
#include <atomic>
#include <bit>

namespace blkcrypt {

namespace {

constexpr unsigned kMaxKeys = 1024;

std::unique_ptr<SkcipherTfm> make_inner(const Alg& a) { return create_skcipher_tfm(a); }

// One unit's window of a scatter-gather list, on the stack unless the unit
// spans many segments.
class UnitSg {
public:
    std::span<SgEntry> storage(std::size_t n) {
        if (n <= small_.size()) return std::span<SgEntry>(small_).first(n);
        big_.resize(n);
        return big_;
    }

private:
    std::array<SgEntry, 8> small_;
    std::vector<SgEntry> big_;
};

// Walks a request's list unit by unit: each take() continues where the last
// one ended instead of rescanning the list from its start (a request of many
// small segments would otherwise cost units x segments).
class SgCursor {
public:
    explicit SgCursor(SgList sg) noexcept : sg_(sg) {}

    SgList take(std::size_t len, UnitSg& into) {
        // Counted first, so that the window's storage is sized once.
        std::size_t n = 0;
        Pos p = pos_;
        for (std::size_t want = len; want && p.i < sg_.size();) {
            const std::size_t t = step(p, want);
            n += t != 0;
            want -= t;
        }
        std::span<SgEntry> out = into.storage(n);
        std::size_t k = 0;
        for (std::size_t want = len; want && pos_.i < sg_.size();) {
            SgEntry e{sg_[pos_.i].data + pos_.off, 0};
            e.len = step(pos_, want);
            if (e.len) out[k++] = e;
            want -= e.len;
        }
        return out.first(k);
    }

private:
    struct Pos {
        std::size_t i = 0, off = 0;  // entry, and bytes of it already taken
    };
    // Takes up to want bytes of the entry at p, moving p past them.
    std::size_t step(Pos& p, std::size_t want) const noexcept {
        const std::size_t t = std::min(sg_[p.i].len - p.off, want);
        p.off += t;
        if (p.off == sg_[p.i].len) {
            ++p.i;
            p.off = 0;
        }
        return t;
    }

    SgList sg_;
    Pos pos_;
};

class GenivAlg final : public SkcipherAlg {
public:
    // spawns: the inner skcipher, then what the mode's Prepare looked up.
    GenivAlg(AlgInfo info, const std::vector<std::shared_ptr<const Alg>>& spawns, GenivTemplate::MakeTfm make)
        : SkcipherAlg(std::move(info)), inner_(spawns.front()), make_(std::move(make)) {
        for (const auto& s : spawns) detail::record_spawn(*this, s);
    }
    std::unique_ptr<SkcipherTfm> create_tfm() const override { return make_(inner_); }

private:
    std::shared_ptr<const Alg> inner_;
    GenivTemplate::MakeTfm make_;
};

}  // namespace

// ---- GenivTfm ---------------------------------------------------------------

GenivTfm::GenivTfm(std::shared_ptr<const Alg> inner)
    : inner_alg_(std::move(inner)), inner_ivsize_(inner_alg_->info().ivsize),
      inner_async_(inner_alg_->info().async) {
    inner_.push_back(make_inner(*inner_alg_));
}

GenivTfm::~GenivTfm() = default;

std::size_t GenivTfm::extra_key_size(std::size_t) const { return 0; }
Status GenivTfm::set_extra_key(ConstBytes) { return Status::Ok; }
Status GenivTfm::check_params(const SectorParams&) const { return Status::Ok; }
Status GenivTfm::post(GenivUnit&) const { return Status::Ok; }

Status GenivTfm::set_sector_params(const SectorParams& p) {
    if (p.sector_size < 512 || p.sector_size > 4096 || !std::has_single_bit(p.sector_size))
        return Status::Invalid;
    if (p.key_count == 0 || p.key_count > kMaxKeys || !std::has_single_bit(p.key_count))
        return Status::Invalid;
    if (Status s = check_params(p); s != Status::Ok) return s;
    params_ = p;
    while (inner_.size() < p.key_count) inner_.push_back(make_inner(*inner_alg_));
    inner_.resize(p.key_count);
    return Status::Ok;
}

Status GenivTfm::setkey(ConstBytes key) {
    // dm-crypt's layout: key_count equal subkeys, then the mode's extra bytes.
    std::size_t extra = extra_key_size(key.size());
    if (extra > key.size()) return Status::Invalid;
    std::size_t body = key.size() - extra;
    if (body % params_.key_count) return Status::Invalid;
    std::size_t sub = body / params_.key_count;
    for (unsigned i = 0; i < params_.key_count; ++i)
        if (Status s = inner_[i]->setkey(key.subspan(i * sub, sub)); s != Status::Ok) return s;
    return set_extra_key(key.last(extra));
}

void GenivTfm::move_to_dst(GenivUnit& u) {
    if (!sg_same(u.src, u.dst)) {
        uint8_t tmp[4096];  // the largest data unit (set_sector_params); no allocation per unit
        sg_gather(u.src, 0, Bytes(tmp, u.size));
        sg_scatter(u.dst, 0, ConstBytes(tmp, u.size));
        secure_wipe(tmp, u.size);
    }
    u.src = u.dst;
}

Status GenivTfm::inner_crypt(unsigned i, ConstBytes in, Bytes out, Bytes iv, bool enc) const {
    SgEntry s{const_cast<uint8_t*>(in.data()), in.size()}, d{out.data(), out.size()};
    SkcipherRequest r;
    r.src = SgList(&s, 1);
    r.dst = SgList(&d, 1);
    r.len = in.size();
    r.iv = iv;
    r.flags = kMayBacklog;
    CryptoWait w;
    if (inner_async_) r.complete = w.callback();
    return w.wait(enc ? inner_[i]->encrypt(r) : inner_[i]->decrypt(r));
}

GenivUnit GenivTfm::unit_at(uint64_t start, std::size_t k, bool enc) const {
    const std::size_t ss = params_.sector_size;
    GenivUnit u;
    u.cc_sector = start + k * (ss >> 9);
    // Only the IV counts in data units; the key index keeps 512-byte sectors.
    u.iv_sector = params_.iv_large_sectors ? u.cc_sector >> (std::countr_zero(ss) - 9) : u.cc_sector;
    u.key_index = static_cast<unsigned>(u.cc_sector & (params_.key_count - 1));
    u.size = ss;
    u.enc = enc;
    return u;
}

Status GenivTfm::crypt(SkcipherRequest& req, bool enc) const {
    const std::size_t ss = params_.sector_size;
    if (req.len % ss) return Status::Invalid;
    const uint64_t start = get_le64(req.iv.data());
    if (inner_async_) return crypt_async(req, enc, start);

    const std::size_t ivlen = std::max<std::size_t>(inner_ivsize_, 8);
    uint8_t ivbuf[kGenivMaxIv];
    UnitSg src, dst;
    SgCursor src_at(req.src), dst_at(req.dst);
    Status st = Status::Ok;
    for (std::size_t k = 0; k < req.len / ss && st == Status::Ok; ++k) {
        GenivUnit u = unit_at(start, k, enc);
        u.src = src_at.take(ss, src);
        u.dst = dst_at.take(ss, dst);
        std::fill(ivbuf, ivbuf + ivlen, 0);
        u.iv = Bytes(ivbuf, ivlen);
        if (st = pre(u); st != Status::Ok) break;
        SkcipherRequest sub;
        sub.src = u.src;
        sub.dst = u.dst;
        sub.len = ss;
        sub.iv = u.iv.first(inner_ivsize_);
        const SkcipherTfm& t = *inner_[u.key_index];
        st = enc ? t.encrypt(sub) : t.decrypt(sub);
        if (st == Status::Ok) st = post(u);
    }
    secure_wipe(ivbuf, sizeof ivbuf);  // lmk's IV is derived from plaintext
    return st;
}

// All units in flight at once; the last to finish completes the request.
struct GenivTfm::AsyncRun {
    struct Unit {
        GenivUnit u;
        UnitSg src, dst;
        uint8_t iv[kGenivMaxIv];
        SkcipherRequest sub;
    };
    const GenivTfm* tfm;
    SkcipherRequest* outer;
    std::unique_ptr<Unit[]> units;
    std::size_t count = 0;
    std::atomic<std::size_t> pending;
    std::atomic<int> err{static_cast<int>(Status::Ok)};

    // True when this was the last outstanding piece of work.
    bool finish(std::size_t i, Status s) {
        if (s == Status::Ok) s = tfm->post(units[i].u);
        if (s != Status::Ok) {
            int ok = static_cast<int>(Status::Ok);
            err.compare_exchange_strong(ok, static_cast<int>(s));
        }
        return pending.fetch_sub(1) == 1;
    }
    ~AsyncRun() {
        for (std::size_t i = 0; i < count; ++i) secure_wipe(units[i].iv, sizeof units[i].iv);
    }
};

Status GenivTfm::crypt_async(SkcipherRequest& req, bool enc, uint64_t start) const {
    const std::size_t ss = params_.sector_size, n = req.len / ss;
    const std::size_t ivlen = std::max<std::size_t>(inner_ivsize_, 8);
    auto* run = new AsyncRun;
    run->tfm = this;
    run->outer = &req;
    run->units = std::make_unique<AsyncRun::Unit[]>(n);
    run->count = n;
    run->pending = n + 1;  // +1: the submitter, so nobody finishes mid-loop
    SgCursor src_at(req.src), dst_at(req.dst);
    for (std::size_t k = 0; k < n; ++k) {
        auto& x = run->units[k];
        x.u = unit_at(start, k, enc);
        x.u.src = src_at.take(ss, x.src);
        x.u.dst = dst_at.take(ss, x.dst);
        std::fill(x.iv, x.iv + ivlen, 0);
        x.u.iv = Bytes(x.iv, ivlen);
        if (Status s = pre(x.u); s != Status::Ok) {
            run->finish(k, s);  // this unit fails; the others already in flight finish
            continue;
        }
        x.sub.src = x.u.src;
        x.sub.dst = x.u.dst;
        x.sub.len = ss;
        x.sub.iv = x.u.iv.first(inner_ivsize_);
        x.sub.flags = kMayBacklog;
        x.sub.complete = [run, k](Status s) {
            if (s == Status::InProgress) return;  // left the backlog
            if (run->finish(k, s)) {
                SkcipherRequest* outer = run->outer;
                auto st = static_cast<Status>(run->err.load());
                delete run;
                outer->complete(st);
            }
        };
        const SkcipherTfm& t = *inner_[x.u.key_index];
        Status s = enc ? t.encrypt(x.sub) : t.decrypt(x.sub);
        if (s != Status::InProgress && s != Status::Busy) run->finish(k, s);
    }
    if (run->pending.fetch_sub(1) == 1) {  // everything finished already
        auto st = static_cast<Status>(run->err.load());
        delete run;
        return st;
    }
    return Status::InProgress;
}

// ---- GenivTemplate ----------------------------------------------------------

GenivTemplate::GenivTemplate(std::string name, Prepare prepare)
    : name_(std::move(name)), prepare_(std::move(prepare)) {}

Result<std::shared_ptr<Alg>> GenivTemplate::create(Registry& reg, const AlgName& name) const {
    if (auto r = check_arg_count(name, 1); !r) return r.error();
    auto inner = grab_spawn(reg, name_, name.args()[0], AlgType::Skcipher);
    if (!inner) return inner.error();
    const AlgInfo& in = (*inner)->info();
    if (in.ivsize > kGenivMaxIv)
        return make_error(Status::Invalid, name_ + ": '" + in.name + "' has a " +
                                               std::to_string(in.ivsize) + "-byte IV; at most " +
                                               std::to_string(kGenivMaxIv) + " supported");
    std::vector<std::shared_ptr<const Alg>> spawns = {*inner};
    auto make = prepare_(reg, **inner, spawns);
    if (!make) return make.error();
    AlgInfo info = in;
    info.type = AlgType::Skcipher;
    set_instance_names(info, name_, {inner->get()});
    info.module = module;
    info.ivsize = 8;  // LE64 of the first 512-byte sector
    info.needs_key = true;
    // dm-crypt's key is key_count inner keys plus the mode's own bytes (tcw's
    // seed and whitening, lmk's seed, elephant's sector key): no fixed range.
    info.min_keysize = info.max_keysize = 0;
    auto alg = std::make_shared<GenivAlg>(info, spawns, std::move(*make));
    return std::shared_ptr<Alg>(alg);
}

}  // namespace blkcrypt
