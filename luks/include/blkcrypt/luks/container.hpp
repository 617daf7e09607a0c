// The LUKS front API: what kind of container a header is, unlocking it with a
// passphrase into a Volume (its dm-crypt table with the volume key), and the
// dm table `cryptsetup open` loads for it, which any engine (copy, serve)
// builds its device from.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt::luks {

enum class Version { Luks1 = 1, Luks2 = 2 };

// The LUKS version of the header at the start of `header`: Invalid "not a
// LUKS device" for anything else (a wrong magic, an unknown version).
Result<Version> detect(BackingStore& header);

struct Volume {
    Version version = Version::Luks1;
    std::string uuid, label;
    // cipher, key, sector_size, iv_large_sectors, offset (512-byte sectors
    // into the data device), iv_offset.
    dm::CryptTable table;
    uint64_t length_sectors = 0;  // 0 = to the end of the data device
    int keyslot = -1;             // the keyslot that opened it
};

// One set of options for both versions (luks2::OpenOptions is this struct).
struct OpenOptions {
    int keyslot = -1;  // try only this keyslot (-1: every one, in order)
    // LUKS2: header warnings (a damaged copy read from the other) are
    // appended here, for the caller to print as cryptsetup does.
    std::vector<std::string>* warnings = nullptr;
    // LUKS2: unlock despite mandatory requirements, for a passphrase test
    // only (cryptsetup open --test-passphrase): the Volume must not be used
    // for data.
    bool ignore_requirements = false;
};

// Unlocks the container whose header is in `header` (the data device itself,
// or a detached header). A passphrase that opens no keyslot: NoKey "No key
// available with this passphrase.".
Result<Volume> open(Registry& reg, BackingStore& header, ConstBytes passphrase, OpenOptions opts = {});

// The same from the volume key itself (cryptsetup's --volume-key-file): NoKey
// "Volume key does not match the volume." when the digest disagrees.
// opts.keyslot is not used.
Result<Volume> open_with_volume_key(Registry& reg, BackingStore& header, ConstBytes volume_key,
                                    OpenOptions opts = {});

// The table `cryptsetup open` loads: one crypt line over the data segment
// of `data`, which the line names `device`. Invalid when `data` ends before
// the payload or before a fixed-size segment's end.
Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device);

// A UUID as libuuid's uuid_parse (and so cryptsetup --uuid) takes it:
// 8-4-4-4-12 hex digits.
bool valid_uuid(std::string_view u) noexcept;

}  // namespace blkcrypt::luks
