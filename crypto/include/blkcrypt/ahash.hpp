// Ahash: the asynchronous hash interface. Every shash is usable through it;
// cryptd(...) and accelerator drivers complete requests on other threads.
#pragma once

#include <blkcrypt/alg_ref.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>

#include <memory>
#include <string_view>

namespace blkcrypt {

class Registry;
class AhashTfm;
class AhashState;

// One hash computation. Create it with Ahash::new_request(); it must not
// outlive its Ahash, and only one operation may be in flight on it.
class AhashRequest {
public:
    SgList src;              // input of update/finup/digest
    std::size_t nbytes = 0;  // bytes of src to hash
    Bytes result;            // digestsize bytes, written by final/finup/digest
    unsigned flags = 0;
    Completion complete;

    // Normally made by Ahash::new_request(); drivers and tests may build one
    // from their own state.
    explicit AhashRequest(std::unique_ptr<AhashState> st);
    AhashRequest(AhashRequest&&) noexcept;
    AhashRequest& operator=(AhashRequest&&) noexcept;
    ~AhashRequest();
    AhashState& state() noexcept { return *st_; }
    const AhashState& state() const noexcept { return *st_; }

private:
    std::unique_ptr<AhashState> st_;
};

class Ahash {
public:
    static Result<Ahash> alloc(Registry& reg, std::string_view name);
    Ahash(Ahash&&) noexcept;
    Ahash& operator=(Ahash&&) noexcept;
    ~Ahash();

    const AlgInfo& info() const noexcept { return ref_.info(); }
    std::size_t digestsize() const noexcept { return info().digestsize; }
    std::size_t statesize() const noexcept { return info().statesize; }
    bool is_async() const noexcept { return info().async; }
    // What it computes: the generic name, or for a wrapper that changes only
    // how it runs (cryptd(X)) the wrapped algorithm's, as the registry
    // recorded it when building the instance.
    const std::string& computes() const noexcept;

    Status setkey(ConstBytes key);
    Result<AhashRequest> new_request() const;

    Status init(AhashRequest& req) const;
    Status update(AhashRequest& req) const;
    Status final(AhashRequest& req) const;
    Status finup(AhashRequest& req) const;
    Status digest(AhashRequest& req) const;
    // Synchronous on the request's state (no callback).
    Status export_state(const AhashRequest& req, Bytes out) const;
    Status import_state(AhashRequest& req, ConstBytes in) const;

    // Flat buffer, blocking.
    Status digest(ConstBytes data, Bytes out) const;

private:
    Ahash(AlgRef ref, std::unique_ptr<AhashTfm> tfm);
    Status check(const AhashRequest& req, bool needs_src, bool needs_result) const;
    AlgRef ref_;
    std::unique_ptr<AhashTfm> tfm_;
    bool keyed_ = false;
};

}  // namespace blkcrypt
