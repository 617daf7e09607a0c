// The encrypted journal (journal_crypt:ALG:KEY, integritysetup
// --journal-crypt), as drivers/md/dm-integrity.c keeps it (create_journal,
// xor_journal, crypt_journal). The kernel encrypts whole sections on their
// way to the disk and decrypts the whole journal when it reads it:
//  - a stream cipher (block size 1: ctr(aes), chacha20) is used once, at
//    load: it encrypts zeros as long as the journal rounded up to 4 KiB
//    pages, then the 32 bytes of the four commit-id bases, all with a zero
//    IV. The first part is the journal's keystream (byte n of the journal is
//    xored with byte n of it); the commit-id bases become their encryption,
//    bumped by one where two came out equal;
//  - a block cipher (cbc(aes)...) encrypts each section as one request, its
//    IV the first ivsize bytes of the encryption (zero IV) of the section
//    number, le32, zero-padded to the block-rounded IV size. The commit-id
//    bases stay as they are.
// The rest of the journal code (journal.cpp, journal_replay.cpp,
// journal_writer.cpp) works on plaintext with the plain bases; the store
// journal_crypt_store() returns puts the encryption between it and the disk.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace blkcrypt::integrity {

// integritysetup's --journal-crypt name in the kernel's form: "ctr-aes" ->
// "ctr(aes)", "cbc-aes" -> "cbc(aes)"; a name with '(' or without '-'
// ("chacha20") is kept.
std::string journal_crypt_kernel_name(std::string_view name);

class JournalCrypt {
public:
    // NotFound for a cipher the registry lacks; Invalid for a refused or
    // missing key, or a geometry with no journal.
    static Result<std::shared_ptr<JournalCrypt>> create(Registry& reg, std::string_view alg, ConstBytes key,
                                                        const Geometry& g);
    virtual ~JournalCrypt() = default;
    virtual bool stream() const noexcept = 0;
    // Sections [first, first + n) in place; `sections` is n whole sections.
    virtual Result<void> encrypt(uint32_t first, Bytes sections) const = 0;
    virtual Result<void> decrypt(uint32_t first, Bytes sections) const = 0;
    // The commit-id base of sequence seq (0..3) as the kernel uses it
    // (ic->commit_ids[seq], as a little-endian value).
    virtual uint64_t commit_base(unsigned seq) const noexcept = 0;
};

// `meta` (the device holding the superblock and journal) seen through the
// journal's encryption: reads and writes of the journal area are decrypted
// and encrypted (whole sections, read-modify-write for a part of one), and
// the commit ids in them translated between the kernel's bases and the
// plain ones (commit_id()), so that an id valid for the kernel in
// sequence k reads as the plain id of sequence k and one the kernel would
// refuse reads as one of no sequence. Everything else passes through.
std::shared_ptr<BackingStore> journal_crypt_store(std::shared_ptr<BackingStore> meta,
                                                  std::shared_ptr<const JournalCrypt> crypt, const Geometry& g);

}  // namespace blkcrypt::integrity
