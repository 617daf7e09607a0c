#include <blkcrypt/alg_info.hpp>
#include <blkcrypt/status.hpp>

namespace blkcrypt {

const char* to_string(Status s) noexcept {
    switch (s) {
    case Status::Ok: return "ok";
    case Status::InProgress: return "in progress";
    case Status::Busy: return "busy";
    case Status::BadMsg: return "authentication failed";
    case Status::Invalid: return "invalid argument";
    case Status::NoKey: return "no key set";
    case Status::NotFound: return "not found";
    case Status::Unsupported: return "not supported";
    case Status::NoMem: return "out of memory";
    case Status::IoError: return "I/O error";
    case Status::Corrupt: return "data corrupted";
    case Status::SelftestFailed: return "self-test failed";
    case Status::Interrupted: return "interrupted";
    }
    return "unknown status";
}

const char* to_string(AlgType t) noexcept {
    switch (t) {
    case AlgType::Cipher: return "cipher";
    case AlgType::Skcipher: return "skcipher";
    case AlgType::Aead: return "aead";
    case AlgType::Shash: return "shash";
    case AlgType::Ahash: return "ahash";
    }
    return "unknown";
}

const char* to_string(SelftestState s) noexcept {
    switch (s) {
    case SelftestState::Pending: return "unknown";  // /proc/crypto's word for not yet tested
    case SelftestState::Passed: return "passed";
    case SelftestState::NoVectors: return "untested";
    case SelftestState::Failed: return "failed";
    }
    return "unknown";
}

}  // namespace blkcrypt
