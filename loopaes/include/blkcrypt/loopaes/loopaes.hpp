// loop-AES volumes as cryptsetup's loopaesOpen maps them (lib/loopaes of
// cryptsetup 2.6). A volume has no header: all there is is a key file of 1,
// 64 or 65 text lines, each hashed into one key. 1 key maps as
// <cipher>-cbc-plain64; 64 keys as <cipher>:64-cbc-lmk (each sector uses key
// sector % 64, lmk IVs, loop-AES v2); 65 keys the same with the 65th key as
// the lmk seed (v3). A wrong key file cannot be detected: it gives garbage.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::loopaes {

constexpr unsigned kMaxKeys = 65;

// The key lines of a key file (the decrypted form; cryptsetup refuses a GPG
// armoured one). CR, LF and NUL end a line, runs of them are one separator;
// every key must be followed by one, all keys have the same non-zero
// length, and there are 1, 64 or 65. Errors carry cryptsetup's message.
Result<std::vector<SecureBuffer>> parse_keyfile(ConstBytes data);

struct Params {
    std::string cipher = "aes";       // cryptsetup --cipher: the base cipher name
    std::size_t key_size = 32;        // bytes per key (--key-size / 8; cryptsetup 2.6: 256 bits)
    std::optional<std::string> hash;  // --hash; default sha256/sha384/sha512 for 16/24/32 bytes
    uint64_t offset = 0;              // --offset: 512-byte sectors into the device
    std::optional<uint64_t> skip;     // --skip: the IV offset; default: offset (as cryptsetup)
};

// The hash cryptsetup uses for the keys (its name, as --hash takes it), or
// nullopt when the key size has no default and none was given.
std::optional<std::string> key_hash(const Params& p);

// The volume key: every line hashed with key_hash(p), cut to p.key_size
// bytes, its first byte XORed with 0x55 (64 keys) or 0xF4 (65 keys).
Result<SecureBuffer> derive_key(Registry& reg, const Params& p, const std::vector<SecureBuffer>& lines);

struct Volume {
    unsigned key_count = 0;  // 1, 64 or 65
    dm::CryptTable table;    // cipher, key, iv_offset, offset
};

// The mapping cryptsetup loopaesOpen loads for this key file.
Result<Volume> open(Registry& reg, const Params& p, ConstBytes keyfile);

// Its table over `data`, which the line names `device`: one crypt line from
// the offset to the end. Invalid "Device DEVICE is too small." when nothing
// is left after the offset.
Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device);

}  // namespace blkcrypt::loopaes
