// cryptsetup convert: a LUKS1 header rewritten as LUKS2 and back, keeping
// the volume key, keyslots (passphrases), UUID and data offset, where
// cryptsetup 2.6.1 allows it (lib/luks2/luks2_luks1_convert.c).
//
// Unlike cryptsetup, which shifts the whole keyslots area by 28 KiB in one
// overlapping write (a crash there loses every keyslot), keyslot areas stay
// where they are; only an area under the new LUKS2 header copies (LUKS1
// keyslot 0, at 4 KiB) is first copied into a free keyslot's area. Every
// write is ordered so that a crash at any point, with any prefix of the
// 512-byte sectors of the write in flight on disk, leaves a container that
// opens with each of its passphrases (as LUKS1 before the switch, as LUKS2
// or LUKS1 after it).
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/status.hpp>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::luks {

// LUKS1 -> LUKS2 (cryptsetup convert --type luks2): 16 KiB metadata, the
// keyslots area up to the data offset (for a detached header, to the end of
// the header device), seqid 2. Refuses when a keyslot under the new
// header has no free keyslot area among LUKS1 slots 1..5 to move to.
Result<void> convert_to_luks2(Registry& reg, BackingStore& header);

// LUKS2 -> LUKS1 (cryptsetup convert --type luks1): only what LUKS1 can
// hold, with cryptsetup's checks and messages (512-byte sectors, one pbkdf2
// digest and segment, no tokens, keyslots 0..7 with pbkdf2 over the digest's
// hash and the segment's cipher). Inactive LUKS1 keyslots get areas in free
// gaps of the keyslots area, as cryptsetup's placeholders.
Result<void> convert_to_luks1(Registry& reg, BackingStore& header);

// cryptsetup convert --type: the one of the two above that gives `to`
// ("Device is already LUKS2 type." when the header is one).
Result<void> convert(Registry& reg, BackingStore& header, Version to);

}  // namespace blkcrypt::luks
