// SecureBuffer: owned bytes for keys and other secrets, wiped on destruction,
// on resize and on move-from, in memory locked against swapping (best effort,
// within RLIMIT_MEMLOCK) and excluded from core dumps. New bytes are zero.
// Never copy a key into a std::string or vector.
#pragma once

#include <blkcrypt/bytes.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace blkcrypt {

void secure_wipe(void* p, std::size_t n) noexcept;

namespace detail {
struct SecretDeleter {  // returns a SecureBuffer's block to the locked pool
    std::size_t n = 0;
    void operator()(uint8_t* p) const noexcept;
};
}  // namespace detail

class SecureBuffer {
public:
    SecureBuffer() = default;
    explicit SecureBuffer(std::size_t n);
    explicit SecureBuffer(ConstBytes src);
    SecureBuffer(const SecureBuffer& o);
    SecureBuffer& operator=(const SecureBuffer& o);
    SecureBuffer(SecureBuffer&& o) noexcept;
    SecureBuffer& operator=(SecureBuffer&& o) noexcept;
    ~SecureBuffer();

    void assign(ConstBytes src);
    void resize(std::size_t n);  // new bytes are zero; old contents kept up to n
    void clear() noexcept;

    uint8_t* data() noexcept { return p_.get(); }
    const uint8_t* data() const noexcept { return p_.get(); }
    std::size_t size() const noexcept { return n_; }
    bool empty() const noexcept { return n_ == 0; }
    uint8_t& operator[](std::size_t i) noexcept { return p_[i]; }
    const uint8_t& operator[](std::size_t i) const noexcept { return p_[i]; }
    Bytes span() noexcept { return {p_.get(), n_}; }
    ConstBytes span() const noexcept { return {p_.get(), n_}; }
    operator ConstBytes() const noexcept { return span(); }

private:
    std::unique_ptr<uint8_t[], detail::SecretDeleter> p_;
    std::size_t n_ = 0;
};

}  // namespace blkcrypt
