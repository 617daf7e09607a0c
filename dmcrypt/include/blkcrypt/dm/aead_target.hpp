// dm-crypt with the integrity feature (integrity:<bytes>:aead|none) over a
// TaggedDevice (dm-integrity): per crypt sector exactly the kernel's
// crypt_convert_block_aead (drivers/md/dm-crypt.c):
//   AAD  = le64(sector) || IV, the sector in 512-byte units relative to the
//          target (iv_offset not added);
//   data = the sector, encrypted in place of the plaintext;
//   tag  = auth tag || IV (random IVs only) || zeros, the block's metadata.
// IVs: `random` ones are drawn on write and read back from the tag; plain,
// plain64 and plain64be come from the sector with iv_offset (>> the sector
// shift with iv_large_sectors), as the kernel's generators. authenc(...)
// ciphers take the volume key as enc key || MAC key (the MAC's digest size)
// and hand the transform the kernel's authenc key blob (crypt_copy_authenckey).
// With `none`, a plain skcipher encrypts and only the random IV is stored.
//
// A tag mismatch fails the read with BadMsg naming the target sector, as the
// kernel's "INTEGRITY AEAD ERROR, sector N". Big I/Os are split over worker
// threads; the data path allocates nothing per sector.
#pragma once

#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/integrity/tagged_device.hpp>
#include <blkcrypt/registry.hpp>

#include <cstdint>
#include <functional>
#include <memory>

namespace blkcrypt::dm {

// What the kernel derives from the table and transform (crypt_ctr_ivmode,
// crypt_integrity_ctr): the tag a TaggedDevice below must carry.
struct AeadLayout {
    bool aead = false;             // integrity:..:aead (else none)
    std::size_t iv_size = 0;       // the transform's IV size, at least 8
    std::size_t iv_stored = 0;     // integrity_iv_size: iv_size with random IVs, else 0
    std::size_t auth_size = 0;     // integrity_tag_size: the AEAD's auth tag (0 for none)
    std::size_t on_disk = 0;       // table.integrity_tag_size = auth + stored IV (+ zeros)
    std::size_t mac_key_size = 0;  // authenc(): the MAC key at the end of the volume key
};

// Allocates the transform to compute the layout, with the kernel's checks
// ("Integrity AEAD auth tag size is not supported.", ...).
Result<AeadLayout> aead_layout(Registry& reg, const CryptTable& table);

struct AeadCryptOptions {
    unsigned threads = 0;                 // crypt workers; 0 = one per core
    std::size_t chunk = 256 * 1024;       // bytes of an I/O one worker converts at a time
    std::size_t queue_depth = 0;          // chunks in flight before submit blocks; 0 = 4 per worker
    bool read_only = false;
    // Each failed sector conversion of a read (BadMsg: the tag does not
    // match), with the sector the kernel logs ("INTEGRITY AEAD ERROR,
    // sector N"): 512-byte units relative to the target. Any thread.
    std::function<void(uint64_t sector, Status)> on_error;
};

// The crypt target of `table` (its integrity fields set) over `lower`, at
// table.offset sectors into it; length_sectors 0: table.length, else the
// rest of `lower`. Refused as the kernel's crypt_integrity_ctr refuses: the
// lower device's tag size must equal the table's, its block size the crypt
// sector size.
Result<std::shared_ptr<BlockDevice>> make_aead_crypt_device(Registry& reg, const CryptTable& table,
                                                            std::shared_ptr<integrity::TaggedDevice> lower,
                                                            uint64_t length_sectors = 0,
                                                            AeadCryptOptions opts = {});

}  // namespace blkcrypt::dm
