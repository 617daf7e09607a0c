// Argon2i / Argon2id (RFC 9106, version 0x13) over Debian's libargon2, the
// library cryptsetup links, called the way cryptsetup's argon2 backend calls
// it: no secret, no associated data, threads = lanes.
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <argon2.h>
#include <sys/mman.h>

#include <cstring>
#include <limits>
#include <string>

namespace blkcrypt {

namespace {

// The memory matrix is derived from the passphrase: it gets its own mapping,
// kept out of core dumps and returned to the kernel at once (a malloc'ed
// gigabyte could stay in the heap). libargon2 wipes it before calling free.
int alloc_matrix(uint8_t** memory, size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        *memory = nullptr;
        return ARGON2_MEMORY_ALLOCATION_ERROR;
    }
    (void)madvise(p, bytes, MADV_DONTDUMP);
    *memory = static_cast<uint8_t*>(p);
    return ARGON2_OK;
}

void free_matrix(uint8_t* memory, size_t bytes) {
    // libargon2 has already cleared the blocks (free_memory wipes before it
    // calls us; the switch for that is not exported by the shared library),
    // so a second pass over up to a GiB would only cost unlock time.
    munmap(memory, bytes);
}

}  // namespace

Result<void> argon2(Argon2Type type, ConstBytes password, ConstBytes salt, uint32_t time_cost,
                    uint32_t memory_kib, uint32_t parallel, Bytes out) {
    constexpr auto u32max = std::numeric_limits<uint32_t>::max();
    if (password.size() > u32max || salt.size() > u32max || out.size() > u32max)
        return make_error(Status::Invalid, "Argon2 input or output too long");
    // libargon2 takes a mutable password pointer (it may clear it): give it a
    // wiping copy so the caller's passphrase is left as it was.
    SecureBuffer pwd(password);
    argon2_context ctx{};
    ctx.out = out.data();
    ctx.outlen = static_cast<uint32_t>(out.size());
    ctx.pwd = pwd.data();
    ctx.pwdlen = static_cast<uint32_t>(pwd.size());
    ctx.salt = const_cast<uint8_t*>(salt.data());
    ctx.saltlen = static_cast<uint32_t>(salt.size());
    ctx.t_cost = time_cost;
    ctx.m_cost = memory_kib;
    ctx.lanes = parallel;
    ctx.threads = parallel;
    ctx.version = ARGON2_VERSION_13;
    ctx.allocate_cbk = alloc_matrix;
    ctx.free_cbk = free_matrix;
    ctx.flags = ARGON2_FLAG_CLEAR_PASSWORD;
    const int rc = argon2_ctx(&ctx, type == Argon2Type::I ? Argon2_i : Argon2_id);
    if (rc == ARGON2_OK) return {};
    secure_wipe(out.data(), out.size());
    const Status s = rc == ARGON2_MEMORY_ALLOCATION_ERROR ? Status::NoMem : Status::Invalid;
    return make_error(s, std::string(type == Argon2Type::I ? "argon2i" : "argon2id") +
                             ": " + argon2_error_message(rc));
}

}  // namespace blkcrypt
