// Status codes and Result<T>: how every library call reports failure.
// The data path returns a Status; set-up calls return Result<T> with a message.
// Exceptions are reserved for the CLI boundary.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace blkcrypt {

enum class Status : int {
    Ok = 0,
    InProgress,   // accepted; the completion callback reports the outcome
    Busy,         // queue full; with kMayBacklog the request is still accepted
    BadMsg,       // authentication tag mismatch
    Invalid,      // bad argument: length, IV size, key size, ...
    NoKey,        // operation on a keyed transform before setkey
    NotFound,     // no such algorithm
    Unsupported,  // the algorithm does not provide this operation
    NoMem,
    IoError,
    Corrupt,      // integrity failure in stored data (verity)
    SelftestFailed,  // the algorithm exists but failed its known-answer test (-ELIBBAD)
    Interrupted,     // stopped on request (a progress callback said stop)
};

const char* to_string(Status s) noexcept;

struct Error {
    Status status = Status::Invalid;
    std::string message;
};

// A value or an Error. Small on purpose: C++20 has no std::expected.
template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error e) : v_(std::move(e)) {}

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    T& value() & { assert(ok()); return std::get<0>(v_); }
    const T& value() const& { assert(ok()); return std::get<0>(v_); }
    T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

    const Error& error() const { assert(!ok()); return std::get<1>(v_); }
    Status status() const noexcept { return ok() ? Status::Ok : std::get<1>(v_).status; }

private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error e) : err_(std::move(e)), ok_(false) {}
    bool ok() const noexcept { return ok_; }
    explicit operator bool() const noexcept { return ok_; }
    const Error& error() const { assert(!ok_); return err_; }
    Status status() const noexcept { return ok_ ? Status::Ok : err_.status; }

private:
    Error err_;
    bool ok_ = true;
};

inline Error make_error(Status s, std::string msg) { return Error{s, std::move(msg)}; }

}  // namespace blkcrypt
