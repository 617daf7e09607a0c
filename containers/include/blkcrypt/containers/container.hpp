// One front door to every container format with a signature: what an image
// is (detect), and an opened container that dumps its metadata, unlocks with
// a secret to the dm table `cryptsetup open` would load, and then tells its
// volume key. The table is built into a device by dm::build_dm_table, read
// by any engine (copy, NBD), as cryptsetup hands its segments to
// dm_create_device. TrueCrypt/VeraCrypt and loop-AES have no signature:
// their own headers (tcrypt/, loopaes/) open them.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/status.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace blkcrypt::containers {

enum class Format { Luks1, Luks2, Bitlk, Fvault2, Verity, Integrity };

// As cryptsetup names the type: "LUKS1", "LUKS2", "BITLK", "FVAULT2", "VERITY",
// "INTEGRITY".
std::string_view format_name(Format f) noexcept;

// The format whose signature `image` carries: a LUKS1 or LUKS2 header (for
// LUKS2 the primary, or a secondary copy at one of the offsets cryptsetup
// searches when the primary is gone), a BitLocker boot sector (also To Go),
// a FileVault 2 (Core Storage) volume header, a dm-verity superblock, a
// dm-integrity superblock (versions 1 to 5).
// NotFound when none; IoError when the image cannot be read.
Result<Format> detect(BackingStore& image);

class Container {
public:
    virtual ~Container() = default;
    virtual Format format() const = 0;
    // The metadata as cryptsetup's dump prints it (luksDump, bitlkDump,
    // fvault2Dump); json: LUKS2's JSON metadata (luksDump
    // --dump-json-metadata), Unsupported for the formats without one.
    virtual Result<std::string> dump(bool json = false) const = 0;
    // Unlocks with a passphrase (BitLocker: also a recovery password or a
    // .BEK file's bytes; an empty secret opens a clear key). NoKey with
    // cryptsetup's words when it opens nothing. The table's lines name the
    // image by the path open() was given.
    // LUKS2 --integrity: the crypt table over /dev/mapper/luks-UUID_dif,
    // which lower_tables() holds (see there).
    virtual Result<dm::DmTable> unlock(ConstBytes secret) = 0;
    // The same from the volume key itself (cryptsetup --volume-key-file):
    // LUKS checks it against its digest (NoKey); BitLocker and FileVault 2
    // keep none, so any key of the right size gives a table.
    virtual Result<dm::DmTable> unlock_volume_key(ConstBytes key) = 0;
    // The tables the last unlocked table stacks on, lowest first, as
    // cryptsetup loads them (LUKS2 --integrity: luks-UUID_dif, the
    // dm-integrity table on the image); empty for the other formats.
    // dm::build_dm_stack builds these, then {name, the unlocked table}.
    virtual const std::vector<dm::NamedDmTable>& lower_tables() const { return no_tables_; }
    // The volume key of the last successful unlock; empty before one.
    virtual const SecureBuffer& volume_key() const = 0;

private:
    static inline const std::vector<dm::NamedDmTable> no_tables_{};
};

// Opens the image at `image` read-only, detects its format and reads its
// metadata. `header`: a detached LUKS header (empty: the image's own).
// Unsupported for a dm-verity superblock (it has no secret: the verity
// commands open it with its root hash) and for a dm-integrity one (no
// secret either: blkcrypt integrity reads it); NotFound when no format is
// detected.
Result<std::unique_ptr<Container>> open(Registry& reg, const std::string& image, const std::string& header = "");

}  // namespace blkcrypt::containers
