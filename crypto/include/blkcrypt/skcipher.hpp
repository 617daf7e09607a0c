// Skcipher: a symmetric cipher over many blocks ("xts(aes)", "cbc(aes)",
// or a bare block cipher name, which processes blocks independently as ECB).
#pragma once

#include <blkcrypt/alg_ref.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>

#include <memory>
#include <string_view>

namespace blkcrypt {

class Registry;
class SkcipherTfm;

struct SkcipherRequest {
    SgList src;              // len bytes of input
    SgList dst;              // len bytes of output; may be the same memory as src
    std::size_t len = 0;
    Bytes iv;                // ivsize bytes; holds the chaining value on completion
    unsigned flags = 0;      // RequestFlag
    Completion complete;     // see request.hpp
};

// How an IV-generation template (plain64(xts(aes)), lmk(cbc(aes)), ...)
// cuts a request into data units. Such a template takes, as its 8-byte IV,
// the little-endian number of the request's first 512-byte sector (dm-crypt's
// cc_sector, iv_offset included), and a request of whole data units.
struct SectorParams {
    std::size_t sector_size = 512;  // data unit: a power of two, 512..4096
    bool iv_large_sectors = false;  // IVs count data units, not 512-byte sectors
    unsigned key_count = 1;         // keys used in turn by sector number (power of two)
};

class Skcipher {
public:
    static Result<Skcipher> alloc(Registry& reg, std::string_view name);
    Skcipher(Skcipher&&) noexcept;
    Skcipher& operator=(Skcipher&&) noexcept;
    ~Skcipher();

    const AlgInfo& info() const noexcept { return ref_.info(); }
    std::size_t ivsize() const noexcept { return info().ivsize; }
    std::size_t blocksize() const noexcept { return info().blocksize; }
    bool is_async() const noexcept { return info().async; }

    Status setkey(ConstBytes key);
    // IV-generation templates only (Unsupported elsewhere); call before setkey,
    // since key_count decides how the key is split.
    Status set_sector_params(const SectorParams& p);

    // Thread-safe after setkey: many requests may run on one transform.
    Status encrypt(SkcipherRequest& req) const;
    Status decrypt(SkcipherRequest& req) const;

    // Flat buffers, blocking (waits for an async transform). in may equal out.
    Status encrypt(ConstBytes in, Bytes out, Bytes iv) const;
    Status decrypt(ConstBytes in, Bytes out, Bytes iv) const;

private:
    Skcipher(AlgRef ref, std::unique_ptr<SkcipherTfm> tfm);
    Status check(const SkcipherRequest& req) const;
    Status crypt_flat(ConstBytes in, Bytes out, Bytes iv, bool enc) const;
    AlgRef ref_;
    std::unique_ptr<SkcipherTfm> tfm_;
    bool keyed_ = false;
};

}  // namespace blkcrypt
