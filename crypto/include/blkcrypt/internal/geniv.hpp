// The IV-generation template family: plain(X), plain64(X), plain64be(X),
// benbi(X), null(X), essiv via plain64(essiv(...)), lmk(X), tcw(X), eboiv(X),
// elephant(X) — dm-crypt's IV modes as skcipher templates over an skcipher X.
//
// An instance takes a request of whole data units (SectorParams::sector_size)
// whose 8-byte IV is LE64 of the first 512-byte sector (dm-crypt's cc_sector,
// iv_offset included). GenivTfm cuts the request into units and, for each,
// picks the key by sector (key_count keys, as dm-crypt's tfms_count), lets the
// mode build the unit's IV (pre) and patch data afterwards (post), and runs
// the inner skcipher on it — synchronously, or all units in flight at once
// when the inner transform is asynchronous.
#pragma once

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>

#include <functional>
#include <memory>
#include <vector>

namespace blkcrypt {

// The largest inner IV an IV-mode template accepts (create refuses more).
inline constexpr std::size_t kGenivMaxIv = 64;

struct GenivUnit {
    uint64_t cc_sector = 0;   // in 512-byte sectors
    uint64_t iv_sector = 0;   // cc_sector, or counted in data units (iv_large_sectors)
    unsigned key_index = 0;
    std::size_t size = 0;     // sector_size
    bool enc = true;
    SgList src;               // pre() may repoint src at dst after copying
    SgList dst;
    Bytes iv;                 // max(inner ivsize, 8) bytes, zeroed before pre()
};

class GenivTfm : public SkcipherTfm {
public:
    explicit GenivTfm(std::shared_ptr<const Alg> inner);
    ~GenivTfm() override;

    Status set_sector_params(const SectorParams& p) final;
    Status setkey(ConstBytes key) final;
    Status encrypt(SkcipherRequest& req) const final { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const final { return crypt(req, false); }

protected:
    // ---- what a mode provides ----
    // Bytes at the end of the key that the mode keeps for itself.
    virtual std::size_t extra_key_size(std::size_t key_len) const;
    virtual Status set_extra_key(ConstBytes extra);
    virtual Status check_params(const SectorParams& p) const;
    // A failure (e.g. of the inner cipher that derives the IV) fails the unit.
    virtual Status pre(GenivUnit& u) const = 0;
    virtual Status post(GenivUnit& u) const;

    // ---- what a mode may use ----
    const SkcipherTfm& inner(unsigned i) const { return *inner_[i]; }
    std::size_t inner_ivsize() const noexcept { return inner_ivsize_; }
    const SectorParams& params() const noexcept { return params_; }
    // Copy the unit's source to its destination and work in place there
    // (modes that must transform the input before the cipher); through a
    // stack buffer, without allocating.
    static void move_to_dst(GenivUnit& u);
    // Run inner transform i synchronously on a flat buffer (waits if async).
    Status inner_crypt(unsigned i, ConstBytes in, Bytes out, Bytes iv, bool enc) const;

private:
    struct AsyncRun;
    Status crypt(SkcipherRequest& req, bool enc) const;
    Status crypt_async(SkcipherRequest& req, bool enc, uint64_t start) const;
    GenivUnit unit_at(uint64_t start, std::size_t k, bool enc) const;

    std::shared_ptr<const Alg> inner_alg_;
    std::vector<std::unique_ptr<SkcipherTfm>> inner_;
    std::size_t inner_ivsize_;
    bool inner_async_;
    SectorParams params_;
};

// An IV-mode template: "NAME(skcipher)". make_tfm builds the mode's transform
// for an instance; extra spawns (lmk's md5, tcw's crc32...) are looked up by
// the mode's own create hook.
class GenivTemplate : public Template {
public:
    using MakeTfm = std::function<std::unique_ptr<SkcipherTfm>(std::shared_ptr<const Alg> inner)>;
    // Called at create time: may refuse the inner algorithm, and returns the
    // factory for this instance (capturing any extra spawns it looked up).
    using Prepare = std::function<Result<MakeTfm>(Registry&, const Alg& inner,
                                                  std::vector<std::shared_ptr<const Alg>>& spawns)>;

    GenivTemplate(std::string name, Prepare prepare);
    std::string_view name() const override { return name_; }
    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override;

private:
    std::string name_;
    Prepare prepare_;
};

// A Prepare for modes that need nothing but the inner skcipher.
template <class Tfm>
GenivTemplate::Prepare simple_geniv() {
    return [](Registry&, const Alg&, std::vector<std::shared_ptr<const Alg>>&)
               -> Result<GenivTemplate::MakeTfm> {
        return GenivTemplate::MakeTfm(
            [](std::shared_ptr<const Alg> inner) { return std::make_unique<Tfm>(std::move(inner)); });
    };
}

}  // namespace blkcrypt
