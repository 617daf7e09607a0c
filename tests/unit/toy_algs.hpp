// Small fake algorithms for registry and async tests: no provider needed.
#pragma once

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/template.hpp>

#include <atomic>
#include <chrono>
#include <thread>

namespace toy {

using namespace blkcrypt;

// An 8-byte "block cipher": XOR with the key, then add `tweak` to each byte.
class XorTfm final : public CipherTfm {
public:
    explicit XorTfm(uint8_t tweak) : tweak_(tweak) {}
    Status setkey(ConstBytes key) override {
        if (key.size() != 8) return Status::Invalid;
        std::copy(key.begin(), key.end(), key_);
        return Status::Ok;
    }
    void encrypt(const uint8_t* in, uint8_t* out, std::size_t n) const override {
        for (std::size_t i = 0; i < n * 8; ++i) out[i] = static_cast<uint8_t>((in[i] ^ key_[i % 8]) + tweak_);
    }
    void decrypt(const uint8_t* in, uint8_t* out, std::size_t n) const override {
        for (std::size_t i = 0; i < n * 8; ++i) out[i] = static_cast<uint8_t>((in[i] - tweak_) ^ key_[i % 8]);
    }

private:
    uint8_t key_[8] = {};
    uint8_t tweak_;
};

inline AlgInfo xor_info(const std::string& driver, int prio) {
    AlgInfo in;
    in.name = "toy";
    in.driver = driver;
    in.module = "test";
    in.priority = prio;
    in.type = AlgType::Cipher;
    in.blocksize = 8;
    in.min_keysize = in.max_keysize = 8;
    in.needs_key = true;
    return in;
}

class XorAlg final : public CipherAlg {
public:
    XorAlg(const std::string& driver, int prio, uint8_t tweak = 0)
        : CipherAlg(xor_info(driver, prio)), tweak_(tweak) {}
    std::unique_ptr<CipherTfm> create_tfm() const override { return std::make_unique<XorTfm>(tweak_); }

private:
    uint8_t tweak_;
};

// wrap(X): an skcipher that applies cipher X block by block (like ecb); its
// create() can be slowed down and counts calls, for the concurrency test.
class WrapTemplate final : public Template {
public:
    std::string_view name() const override { return "wrap"; }
    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& n) const override {
        ++calls;
        if (auto r = check_arg_count(n, 1); !r) return r.error();
        if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        auto inner = grab_spawn(reg, "wrap", n.args()[0], AlgType::Cipher);
        if (!inner) return inner.error();
        AlgInfo info = (*inner)->info();
        info.type = AlgType::Skcipher;
        set_instance_names(info, "wrap", {inner->get()});
        return std::shared_ptr<Alg>(std::make_shared<Inst>(info, *inner));
    }
    mutable std::atomic<int> calls{0};
    int delay_ms = 0;

private:
    class Inst final : public SkcipherAlg {
    public:
        Inst(AlgInfo i, std::shared_ptr<const Alg> c) : SkcipherAlg(std::move(i)), c_(*this, std::move(c)) {}
        // Spawn<SkcipherAlg> of a cipher: the ECB adapter.
        std::unique_ptr<SkcipherTfm> create_tfm() const override { return c_.create_tfm(); }

    private:
        Spawn<SkcipherAlg> c_;
    };
};

}  // namespace toy
