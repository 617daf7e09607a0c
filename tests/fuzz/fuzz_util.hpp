// Shared by the harnesses: a fresh registry per input (so nothing a name
// instantiates outlives the input: memory and cryptd threads stay bounded and
// every run is reproducible alone), and a little reader of the input bytes.
#pragma once

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace fuzz {

// The built-in providers register without their self-tests (they are the
// same for every input and would dominate the time); template instances
// built for the input are self-tested as usual, from the same vectors.
inline std::unique_ptr<blkcrypt::Registry> make_registry() {
    static thread_local bool loading = false;
    // The self-test needs the registry it tests for, made just below.
    auto self = std::make_shared<blkcrypt::Registry*>(nullptr);
    auto selftest = [self](const blkcrypt::Alg& a, bool full) -> blkcrypt::SelftestOutcome {
        if (loading) return {blkcrypt::SelftestState::NoVectors, "not tested (fuzzing)"};
        return blkcrypt::run_testmgr(**self, a, full);
    };
    auto reg = std::make_unique<blkcrypt::Registry>(selftest);
    *self = reg.get();
    loading = true;
    auto r = blkcrypt::register_defaults(*reg);
    loading = false;
    if (!r) std::abort();  // an incomplete registry would fuzz less than it claims
    return reg;
}

// Consumes the input from the front: fixed-size fields, then the rest.
class Input {
public:
    Input(const uint8_t* data, std::size_t size) : p_(data), n_(size) {}
    uint8_t byte() {
        if (!n_) return 0;
        --n_;
        return *p_++;
    }
    uint32_t u32() {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v = v << 8 | byte();
        return v;
    }
    std::string_view take(std::size_t n) {
        n = std::min(n, n_);
        std::string_view s(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        n_ -= n;
        return s;
    }
    std::string_view rest() { return take(n_); }
    std::size_t left() const noexcept { return n_; }

private:
    const uint8_t* p_;
    std::size_t n_;
};

}  // namespace fuzz
