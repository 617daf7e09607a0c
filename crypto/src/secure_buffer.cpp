#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cstring>
#include <strings.h>

namespace blkcrypt {

void secure_wipe(void* p, std::size_t n) noexcept {
    if (p && n) explicit_bzero(p, n);
}

SecureBuffer::SecureBuffer(std::size_t n) : p_(n ? new uint8_t[n]() : nullptr), n_(n) {}

SecureBuffer::SecureBuffer(ConstBytes src) { assign(src); }

SecureBuffer::SecureBuffer(const SecureBuffer& o) { assign(o.span()); }

SecureBuffer& SecureBuffer::operator=(const SecureBuffer& o) {
    if (this != &o) assign(o.span());
    return *this;
}

SecureBuffer::SecureBuffer(SecureBuffer&& o) noexcept : p_(std::move(o.p_)), n_(o.n_) { o.n_ = 0; }

SecureBuffer& SecureBuffer::operator=(SecureBuffer&& o) noexcept {
    if (this != &o) {
        clear();
        p_ = std::move(o.p_);
        n_ = o.n_;
        o.n_ = 0;
    }
    return *this;
}

SecureBuffer::~SecureBuffer() { clear(); }

void SecureBuffer::clear() noexcept {
    secure_wipe(p_.get(), n_);
    p_.reset();
    n_ = 0;
}

void SecureBuffer::assign(ConstBytes src) {
    SecureBuffer tmp(src.size());
    if (!src.empty()) std::memcpy(tmp.data(), src.data(), src.size());
    *this = std::move(tmp);
}

void SecureBuffer::resize(std::size_t n) {
    SecureBuffer tmp(n);
    if (n_ && n) std::memcpy(tmp.data(), data(), std::min(n, n_));
    *this = std::move(tmp);
}

}  // namespace blkcrypt
