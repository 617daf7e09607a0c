#include "man_prose.hpp"

#include <array>

namespace cli {
namespace {

struct PageProse {
    std::string_view page;
    std::span<const ManSection> sections;
};

constexpr ManSection kMain[] = {
    {"DESCRIPTION", R"P(Algorithms and templates are registered by name and composed on demand (xts(aes), essiv(cbc(aes),sha256), cryptd(sha256)); each implementation has a generic name, a driver name and a priority, and a lookup returns the best driver that passed its self-test. The dm-crypt engine's output is byte-identical to the kernel's dm-crypt, and the verity engines' trees and digests to veritysetup and fsverity digest. The container commands (luks, tcrypt, bitlk, fvault2, loopaes) open what cryptsetup opens, without root or device-mapper; integrity formats, reads, writes and serves dm-integrity devices as integritysetup and the kernel do; serve makes any of them a network block device.

cryptsetup's action names are accepted as commands: luksFormat, luksDump, luksAddKey, luksChangeKey, luksRemoveKey, luksKillSlot, luksErase, luksHeaderBackup, luksHeaderRestore, luksUUID, isLuks, convert, config, token, tcryptDump, bitlkDump and fvault2Dump. "blkcrypt help luksFormat" shows the help of the action.)P"},
    {"OUTPUT FILES", R"P(One policy holds for every command. A symlink is followed. A regular output is written under .NAME.blkcrypt-tmp.XXXXXX next to it, fsynced and renamed, keeping the mode and owner of the file it replaces (new plaintext or key outputs are 0600). A block device is written in place. "-", FIFOs and character devices are streamed to when the command writes in order, and refused otherwise. Nothing but a regular file is ever replaced.

An NBD URI (nbd://host[:port]/export, nbds:// with TLS, nbd+unix:///export?socket=PATH) may stand for any image, input or output: blkcrypt then reads and writes the export another NBD server (nbdkit, qemu-nbd, rbd-nbd) offers, with several requests in flight and several connections where the server allows multi-conn (docs/remote.md). An export given as an output is written in place, as a block device is, and keeps what a failed run wrote.

No output may be an input of the same command (compared by device and inode). Several outputs appear together or not at all. SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGQUIT remove the temporary files and exit 128+signal; a later run warns about a stale temporary file. Errors name the output and the real reason ("No space left on device").

Numeric options take decimal digits only and are range-checked (--threads at most 256). An input that shrinks or grows while it is read is an error, never a crash. A failed tag check writes no plaintext at all. An option that a command or action does not honour is refused, never ignored.)P"},
    {"EXAMPLES", R"P(    blkcrypt list
    blkcrypt hash --alg sha256 disk.img
    blkcrypt luksDump disk.img
    blkcrypt verity verify data.img data.hash "$(cat root.txt)")P"},
};

constexpr ManSection kList[] = {
    {"DESCRIPTION", R"P(Every algorithm of the default registry, plus those of the loaded plugins, is printed in the layout of /proc/crypto: its generic name, driver name, module, priority, type and sizes, and whether its self-test passed. Crypto++ drivers have priority 100, OpenSSL drivers 300, x86 drivers (SHA-NI, VAES) 400, each registered only when the CPU has its instructions; BLKCRYPT_X86_DISABLE=avx512,vaes,sha_ni (or all) hides CPU features. A plugin's algorithms name the plugin's path as their module.)P"},
    {"EXAMPLES", R"P(    blkcrypt list
    blkcrypt list --json
    BLKCRYPT_PLUGIN_PATH=build/plugins blkcrypt list)P"},
};

constexpr ManSection kSelftest[] = {
    {"DESCRIPTION", R"P(Runs the known-answer vectors of the named algorithms, or of all of them, through every registered driver. The vectors come from the algorithms' standards and, for the dm-crypt IV modes, from images the real kernel encrypted. The exit status is 1 if any test fails; a driver that fails is never returned by a lookup.)P"},
    {"EXAMPLES", R"P(    blkcrypt selftest
    blkcrypt selftest 'xts(aes)' sha256
    blkcrypt selftest --json)P"},
};

constexpr ManSection kHash[] = {
    {"DESCRIPTION", R"P(Prints one line per file, as sha256sum does ("-" or no file: stdin). Any hash or keyed hash of the registry works, composed ones included (hmac(sha256), cryptd(sha256)); --key gives the key or seed of a keyed hash. --driver forces one implementation instead of the highest-priority one.)P"},
    {"EXAMPLES", R"P(    blkcrypt hash --alg sha256 disk.img
    blkcrypt hash --alg crc32c --key 00000000 file
    blkcrypt hash --alg 'cryptd(sha256)' file
    blkcrypt hash --alg sha256 --driver sha256-cryptopp file)P"},
};

constexpr ManSection kSkcipher[] = {
    {"DESCRIPTION", R"P(Encrypts or decrypts a buffer with a symmetric cipher or mode of the registry (aes, cbc(aes), xts(aes), adiantum(xchacha12,aes), ...), as the kernel's skcipher API does: the input length must suit the mode. Key and IV are given in hex. --driver forces one implementation.)P"},
    {"EXAMPLES", R"P(    blkcrypt skcipher --alg aes --key 000102030405060708090a0b0c0d0e0f --encrypt --in pt --out ct
    blkcrypt skcipher --alg 'xts(aes)' --driver 'xts(aes-cryptopp)' --key KEY --iv IV --decrypt --in ct)P"},
};

constexpr ManSection kAead[] = {
    {"DESCRIPTION", R"P(Authenticated encryption with the AEAD templates (gcm, ccm, rfc4106, rfc4309, rfc4543, authenc, rfc7539). Encryption appends the tag of --authsize bytes; decryption checks it first and writes no plaintext at all when it fails (exit 1).)P"},
    {"EXAMPLES", R"P(    blkcrypt aead --alg 'gcm(aes)' --key K --iv 000000000000000000000000 --authsize 16 --encrypt --in pt --out ct)P"},
};

constexpr ManSection kCrypt[] = {
    {"DESCRIPTION", R"P(blkcrypt crypt does in userspace what a dm-crypt mapping does: encrypt writes the plaintext image IN through a crypt target whose backing file is OUT; decrypt reads a ciphertext image through a target. The table is the crypt-specific part of a dm table line, in either grammar (aes-xts-plain64, aes:64-cbc-lmk, capi:xts(aes)-plain64, capi:cbc(aes)-essiv:sha256), with the optional parameters sector_size:N, iv_large_sectors, allow_discards and the workqueue flags (accepted and reported back).

Without --table, the key is made as "cryptsetup open --type plain" makes it, from a key file or a passphrase (asked for without echo, or one line of stdin) hashed with --hash, with cryptsetup's defaults (aes-cbc-essiv:sha256, 256 bits, ripemd160); the ciphertext matches the kernel's through cryptsetup. A key never comes from the command line.

IV modes: plain, plain64, plain64be, essiv:HASH, benbi, null, lmk (v2 and v3), tcw, eboiv and elephant, with any cipher of the registry, multi-key (aes:4-...), sector sizes 512 to 4096 and iv_large_sectors. Tables with the integrity feature (integrity:N:aead|none: capi:gcm(aes)-random, capi:rfc4309(ccm(aes))-random, capi:rfc7539(chacha20,poly1305)-random, capi:aegis128-random, capi:authenc(hmac(sha256),xts(aes))-plain64 or -random) need a dm-integrity device underneath: they are served by serve --dm-table over an integrity line, and refused here, as is the random IV mode without them.

IN and OUT may be "-", FIFOs or character devices, so pipelines work; a stream without --size is read to its end. A block device OUT is written in place; --in-place writes an existing regular file directly instead of through a temporary file. table prints the full kernel table line for dmsetup (the key only with --show-key); serve exports the plaintext view over NBD, read-write unless --read-only.)P"},
    {"EXAMPLES", R"P(    head -c 64 /dev/urandom > k
    blkcrypt crypt encrypt --cipher aes-xts-plain64 --key-file k --key-size 512 disk.img disk.enc
    blkcrypt crypt encrypt -c aes-xts-plain64 -s 512 -h sha256 disk.img disk.enc
    blkcrypt crypt decrypt --table "aes-xts-plain64 $(xxd -p -c 64 k) 0 1 sector_size:4096" img.enc img
    zstd -dc disk.img.zst | blkcrypt crypt encrypt -c aes-xts-plain64 --key-file k - - | ssh host 'cat > disk.enc'
    blkcrypt crypt table -c aes-xts-plain64 -s 512 --key-file k --device /dev/loop0 --size 32768)P"},
    {"NOTES", R"P(The second example is "cryptsetup open --type plain -c aes-xts-plain64 -s 512 -h sha256 disk.enc x" followed by dd from disk.img to /dev/mapper/x, without root. The sector-level proof is tests/dmcrypt/golden: 90 cases encrypted by the real Linux dm-crypt.)P"},
};

constexpr ManSection kVerity[] = {
    {"DESCRIPTION", R"P(blkcrypt verity takes veritysetup's option names and prints its summary: formats 0 and 1, any registry hash (sha256, sha1, sha512, a driver name, cryptd(sha256)), data and hash block sizes from 512 bytes to 512 KiB, salts of 0 to 256 bytes (32 random bytes by default), --hash-offset, --data-blocks, a superblock or --no-superblock, and the tree inside the data file past the data (HASH = DATA).

verify names every corrupted block and exits as veritysetup verify does (2 for corrupted blocks). read serves the data through the verity read path (each block checked on read, hash blocks verified once and cached) with the kernel's policies (--ignore-corruption, --ignore-zero-blocks, --check-at-most-once), from a dm table line or from DATA HASH ROOT; table prints the line cryptsetup would load; serve exports the view read-only over NBD, a corrupted block failing with EIO.

Reed-Solomon FEC (--fec-device, --fec-roots, --fec-offset): format writes the FEC file byte-identical to "veritysetup format --fec-device"; verify corrects and reports as veritysetup does (--repair writes the blocks back, --repair-to and --repair-hash-to into corrected copies); dump prints veritysetup's FEC lines; read and serve correct on read as the kernel does. sign makes a PKCS#7 root-hash signature (openssl smime -sign -nocerts -noattr); --root-hash-signature with --trusted-cert checks it as the kernel does.

The input is streamed once in bounded memory (about 20 MiB for any size, 8 MiB more when the input is not in the page cache: it is then read with O_DIRECT and stays uncached) on every core.)P"},
    {"EXAMPLES", R"P(    blkcrypt verity format disk.img disk.hash --root-hash-file root.txt
    blkcrypt verity verify disk.img disk.hash "$(cat root.txt)"
    blkcrypt verity format disk.img disk.img --hash-offset $(stat -c %s disk.img)
    blkcrypt verity sign "$(cat root.txt)" --key k.pem --cert c.pem --out root.sig
    blkcrypt verity verify disk.img disk.hash "$(cat root.txt)" --root-hash-signature root.sig --trusted-cert c.pem)P"},
};

constexpr ManSection kFsverity[] = {
    {"DESCRIPTION", R"P(digest prints what "fsverity digest" prints (sha256:HEX FILE) and writes the same Merkle tree and descriptor files (--out-merkle-tree, --out-descriptor), with fsverity's hash algorithms, block sizes and salts. The file is streamed once in bounded memory on every core. sign and verify-sig have pages of their own.)P"},
    {"EXAMPLES", R"P(    blkcrypt fsverity digest file
    blkcrypt fsverity digest --hash-alg sha512 --block-size 1024 --salt 0102 file)P"},
};

constexpr ManSection kFsveritySign[] = {
    {"DESCRIPTION", R"P(Writes the PKCS#7 signature of the file's fs-verity digest that "fsverity sign" writes, for the kernel's built-in signature verification (fs.verity.require_signatures): DER, without certificates or attributes, signed with --key over the certificate --cert.)P"},
    {"EXAMPLES", R"P(    blkcrypt fsverity sign file file.sig --key key.pem --cert cert.pem)P"},
};

constexpr ManSection kFsverityVerifySig[] = {
    {"DESCRIPTION", R"P(Checks a built-in fs-verity signature of a file as the kernel would: the signature must be PKCS#7 over the file's fs-verity digest, made by the key of the certificate --cert.)P"},
    {"EXAMPLES", R"P(    blkcrypt fsverity verify-sig file file.sig --cert cert.pem)P"},
};

constexpr ManSection kServe[] = {
    {"DESCRIPTION", R"P(Makes an image a network block device on a Unix socket (mode 0600) or on TCP: a plain image, read-write unless --read-only, or with --dm-table a stack of dmsetup table files (linear, zero, error, crypt, verity; verity on crypt as Android does). Any NBD client uses it without root: nbdinfo, nbdcopy, nbdfuse (a FUSE file), qemu-img, qemu-io and qemu. An image with a LUKS1, LUKS2, BitLocker or FileVault 2 signature is unlocked and its plaintext served, as "blkcrypt FORMAT serve" serves it with the same options; --type names the format of an image without a signature (tcrypt, loopaes, plain), as cryptsetup open --type does, and --type raw serves a container's bytes as they are. An image without a signature, a dm-verity hash device among them, is served as it is. blkcrypt open is the same command under cryptsetup's name.

SIGINT and SIGTERM finish the requests in flight, flush and exit 0. Off loopback, TLS is required: --tls-certs DIR in qemu's layout, or --tls-psk FILE from psktool; clients use nbds:// URLs. A plain image's holes show in "nbdinfo --map"; --json prints events for scripts.)P"},
    {"EXAMPLES", R"P(    blkcrypt serve --socket /tmp/d.sock disk.img &
    nbdcopy "nbd+unix:///?socket=/tmp/d.sock" copy.img
    qemu-img info "nbd+unix:///?socket=/tmp/d.sock"
    blkcrypt serve --port 10809 --bind 0.0.0.0 --tls-certs /etc/pki/blkcrypt disk.img &
    nbdcopy "nbds://server/?tls-certificates=/etc/pki/blkcrypt-client" copy.img
    blkcrypt serve --dm-table dec=crypt.table --dm-table verity.table --socket /tmp/t.sock
    blkcrypt serve --socket /tmp/l.sock --key-file pass.txt luks.img &
    blkcrypt serve --socket /tmp/r.sock --type raw luks.img &
    blkcrypt crypt serve --table "aes-xts-plain64 $(xxd -p -c 64 k) 0" --socket /tmp/d.sock disk.enc &
    nbdfuse mnt/disk "nbd+unix:///?socket=/tmp/d.sock" &
    qemu-system-x86_64 -drive file=nbd+unix:///?socket=/tmp/d.sock,format=raw ...)P"},
};

// The pages of the commands that detect the format (cmd_detect.cpp) share
// how the format is found.
constexpr std::string_view kDetection = R"P(The format comes from IMAGE's signature, as blkid and cryptsetup find it: a LUKS1 or LUKS2 header (for LUKS2 also a secondary header when the primary is lost), a BitLocker or BitLocker To Go boot sector, a FileVault 2 (Core Storage) volume header, or a dm-verity superblock (dump only). With --header the detached header holds it. TrueCrypt, VeraCrypt, loop-AES and plain dm-crypt images have no signature: --type (-M) names the format, with cryptsetup open's values luks, luks1, luks2, plain, loopaes, tcrypt, bitlk and fvault2. --type luks1 or luks2 against the other version is refused as cryptsetup refuses it ("Device X is not a valid LUKS device.", exit 1), and so is an image without a signature and without --type.

The words are then handed to the format's command unchanged: blkcrypt ACTION IMAGE runs blkcrypt luks ACTION IMAGE (or bitlk, fvault2, tcrypt, loopaes; plain runs blkcrypt crypt), so every option, message, output and exit status is that command's. IMAGE must be a regular file or a block device; a FIFO, a directory or a socket is refused at once (exit 4).)P";

constexpr ManSection kDump[] = {
    {"DESCRIPTION", R"P(blkcrypt dump is cryptsetup's luksDump, bitlkDump, fvault2Dump and tcryptDump, and veritysetup dump, in one command that finds the format itself. --dump-volume-key asks cryptsetup's question first (-q skips it) and then the secret.)P"},
    {"FORMAT DETECTION", kDetection},
    {"EXAMPLES", R"P(    blkcrypt dump disk.img
    blkcrypt dump --dump-json-metadata luks2.img
    blkcrypt dump --type tcrypt -h sha512 vol.tc
    blkcrypt dump hash.img)P"},
    {"NOTES", R"P(The examples do what these do: cryptsetup luksDump disk.img (bitlkDump for a BitLocker image, fvault2Dump for FileVault 2); cryptsetup luksDump --dump-json-metadata; cryptsetup tcryptDump -h sha512; veritysetup dump hash.img.)P"},
};

constexpr ManSection kTestPassphrase[] = {
    {"DESCRIPTION", R"P(blkcrypt test-passphrase is "cryptsetup open --test-passphrase" for every format that has a secret to check: the passphrase (prompted for on a terminal, --tries times, else one line of stdin), or --key-file, opens the container or the command exits 2 with the format's message.)P"},
    {"FORMAT DETECTION", kDetection},
    {"EXAMPLES", R"P(    blkcrypt test-passphrase disk.img
    blkcrypt test-passphrase --key-file KEY.BEK bitlocker.img
    blkcrypt open --test-passphrase mac.img)P"},
    {"NOTES", R"P(The examples do what "cryptsetup open --test-passphrase" does for a LUKS, BitLocker and FileVault 2 image. plain and loopaes have nothing to check a secret against; they are refused with cryptsetup's words.)P"},
};

constexpr ManSection kDecrypt[] = {
    {"DESCRIPTION", R"P(blkcrypt decrypt writes what "cryptsetup open" maps, as a dd of the mapping would copy it, for whatever format IMAGE has. OUT follows the output policy (docs/outputs.md), and a wrong secret writes nothing (exit 2).)P"},
    {"FORMAT DETECTION", kDetection},
    {"EXAMPLES", R"P(    blkcrypt decrypt disk.img plain.img
    blkcrypt decrypt --type tcrypt --veracrypt vol.hc plain.img
    blkcrypt decrypt --type loopaes --key-file KEYS disk.img plain.img
    blkcrypt decrypt --type plain --cipher aes-xts-plain64 -s 512 -h sha256 disk.enc plain.img)P"},
    {"NOTES", R"P(The examples do what "cryptsetup open" and a dd of the mapping do, as root: for the image's own format, then with --type tcrypt --veracrypt, --type loopaes --key-file KEYS and --type plain.)P"},
};

constexpr ManSection kTable[] = {
    {"DESCRIPTION", R"P(blkcrypt table prints the device-mapper table lines that "cryptsetup open" loads for IMAGE, in dmsetup's format, the key as zeros unless --show-key.)P"},
    {"FORMAT DETECTION", kDetection},
    {"EXAMPLES", R"P(    blkcrypt table disk.img
    blkcrypt table --show-key disk.img > disk.table
    blkcrypt serve --dm-table disk.table --socket /tmp/t.sock)P"},
    {"NOTES", R"P(The examples print what "dmsetup table" (with --showkeys) prints after "cryptsetup open"; "blkcrypt serve --dm-table" of that output serves exactly what "blkcrypt decrypt" writes.)P"},
};

constexpr ManSection kOpen[] = {
    {"DESCRIPTION", R"P(blkcrypt open is blkcrypt serve under cryptsetup's name: IMAGE unlocked and served over NBD, read-write unless --read-only (-r, --readonly), with every option of serve. cryptsetup's second argument NAME names the device-mapper mapping; here it names the NBD export (as --export-name NAME does; the default export "" is the same one), and giving both with different names is refused. --type raw serves IMAGE's bytes as they are, as does an image without a signature. --test-passphrase only checks the secret, as blkcrypt test-passphrase, and ignores NAME as cryptsetup does.)P"},
    {"FORMAT DETECTION", kDetection},
    {"EXAMPLES", R"P(    blkcrypt open --socket /tmp/d.sock disk.img data &
    nbdcopy "nbd+unix:///data?socket=/tmp/d.sock" plain.img
    blkcrypt open --type tcrypt --readonly --socket /tmp/t.sock vol.tc &
    blkcrypt open --test-passphrase disk.img)P"},
    {"NOTES", R"P(The examples do what these do: cryptsetup open disk.img data, then dd from /dev/mapper/data, as root; cryptsetup open --type tcrypt --readonly vol.tc; cryptsetup open --test-passphrase disk.img.)P"},
};

constexpr ManSection kBench[] = {
    {"DESCRIPTION", R"P(Prints cryptsetup-benchmark-style throughput for every cipher, mode and key size and for the hashes, with the driver the registry picks; --driver measures one implementation, --request the request size. bench/compare.py in the source tree runs the peer tools and blkcrypt side by side.)P"},
    {"EXAMPLES", R"P(    blkcrypt bench
    blkcrypt bench --cipher aes-xts --key-size 512
    blkcrypt bench --cipher aes-xts --driver xts-aes-openssl --json)P"},
};

constexpr ManSection kLuks[] = {
    {"DESCRIPTION", R"P(blkcrypt luks opens LUKS1 and LUKS2 containers made by cryptsetup (any cipher of the dm-crypt engine, PBKDF2 over sha1, sha256, sha512, ripemd160 or whirlpool, Argon2i and Argon2id, sector sizes 512 to 4096, labels, detached headers) without root or device-mapper, and makes containers that cryptsetup opens.

format uses cryptsetup 2.6.1's defaults (LUKS2, argon2id benchmarked, 4096-byte sectors for an image file; --type luks1 for LUKS1). dump prints what "cryptsetup luksDump" prints (--dump-json-metadata too). add-key, change-key, remove-key, kill-slot, erase, header-backup, header-restore and convert --type luks1|luks2 are crash-safe. config sets the label, subsystem and keyslot priority; token adds, removes, imports and exports tokens.

decrypt IMAGE OUT and encrypt IN IMAGE (--format: a new container sized for IN) run the data through the dm-crypt engine, --start and --size for a range (1 MiB at 3 TiB of a sparse 4 TiB image). serve exports the plaintext over NBD, read-write unless --read-only. qemu-img's LUKS1 images and blkcrypt's are read by either tool. Passphrases are read as cryptsetup reads them; a wrong one prints "No key available with this passphrase." and exits 2.)P"},
    {"EXAMPLES", R"P(    blkcrypt luksFormat disk.img && blkcrypt luks encrypt fs.img disk.img
    blkcrypt luksDump disk.img
    blkcrypt luks dump --dump-json-metadata disk.img
    blkcrypt luks decrypt --key-file pass disk.img fs.img
    blkcrypt luks decrypt --key-file pass --start 2048 --size 8 q.luks s.bin
    blkcrypt luks encrypt --format --type luks1 fs.img disk.img
    blkcrypt luks encrypt --format --header hdr fs.img disk.img
    blkcrypt convert --type luks2 disk.img
    blkcrypt config --label data --priority prefer -S 1 disk.img
    blkcrypt token import --json-file tok.json -S 0 disk.img
    blkcrypt luks serve --socket /tmp/l.sock disk.luks &
    nbdfuse mnt/plain "nbd+unix:///?socket=/tmp/l.sock" &)P"},
    {"NOTES", R"P(The examples, in order, do what these do: cryptsetup luksFormat disk.img; cryptsetup luksDump disk.img; cryptsetup luksDump --dump-json-metadata disk.img; cryptsetup open and dd, as root; dd skip=2048 count=8 of the mapping; qemu-img convert -O luks fs.img disk.img; cp fs.img disk.img and cryptsetup reencrypt --encrypt --header hdr disk.img; cryptsetup convert --type luks2 disk.img; cryptsetup config; cryptsetup token import; and cryptsetup open, with the plaintext as a FUSE file read-write.)P"},
};

constexpr ManSection kTcrypt[] = {
    {"DESCRIPTION", R"P(blkcrypt tcrypt opens TrueCrypt and VeraCrypt volumes as cryptsetup's TCRYPT does, without root: every KDF (PBKDF2 over ripemd160, sha512, whirlpool, sha256 and sha1; VeraCrypt's iterations and --veracrypt-pim) and cipher chain is tried (-h and -c limit the search), with keyfiles (--key-file, repeatable), hidden volumes, backup headers and system encryption.

Chains (serpent-twofish-aes, ...) run as one cascade(...) composition in the dm-crypt engine; xts, lrw and the legacy CBC modes work (tcw IV: aes, serpent, twofish, cast5, des3_ede, TrueCrypt's blowfish_le, and the outer-CBC chains as cbc(cascade(aes,twofish)), which the kernel cannot map). dump prints what "cryptsetup tcryptDump" prints; serve exports the plaintext over NBD, read-write unless --read-only; a wrong secret exits 2.)P"},
    {"EXAMPLES", R"P(    blkcrypt tcrypt dump vol.tc
    blkcrypt tcrypt decrypt --tcrypt-hidden vol.tc fs.img
    blkcrypt tcrypt serve --read-only --socket /tmp/t vol.tc
    blkcrypt tcrypt decrypt --tcrypt-system --partition 2 disk.img c.img)P"},
    {"NOTES", R"P(The examples do what these do: cryptsetup tcryptDump vol.tc; cryptsetup tcryptOpen --tcrypt-hidden and dd, as root; cryptsetup tcryptOpen --readonly, over NBD; cryptsetup tcryptOpen --tcrypt-system /dev/sda2.)P"},
};

constexpr ManSection kBitlk[] = {
    {"DESCRIPTION", R"P(blkcrypt bitlk reads BitLocker and BitLocker To Go volumes as cryptsetup's BITLK does, without root. dump prints what "cryptsetup bitlkDump" prints (--dump-volume-key too). decrypt IMAGE OUT writes exactly what the kernel maps with "cryptsetup bitlkOpen" (aes-cbc-eboiv, aes-cbc-elephant, aes-xts-plain64; the moved boot sector back in place, the metadata areas as zeros); serve exports it over NBD.

A passphrase, a 48-digit recovery password or a .BEK startup key (--key-file) unlocks it; a clear-key volume (suspended protection), which cryptsetup refuses, opens without a secret. Beyond cryptsetup 2.6: 512- and 4096-byte sectors, non-ASCII passphrases hashed as Windows hashes them, volumes whose encryption is paused (the converted part decrypted, the rest as stored), and the backup FVE metadata when the first copy fails its CRC32.)P"},
    {"EXAMPLES", R"P(    blkcrypt bitlkDump disk.img
    blkcrypt bitlk decrypt disk.img plain.img
    blkcrypt bitlk decrypt --key-file KEY.BEK disk.img plain.img
    blkcrypt bitlk serve --socket /tmp/s disk.img)P"},
    {"NOTES", R"P(The examples do what these do: cryptsetup bitlkDump disk.img; cryptsetup bitlkOpen and dd, as root; cryptsetup bitlkOpen --key-file KEY.BEK; cryptsetup bitlkOpen --readonly, over NBD.)P"},
};

constexpr ManSection kLoopaes[] = {
    {"DESCRIPTION", R"P(blkcrypt loopaes maps loop-AES volumes as "cryptsetup loopaesOpen" does, without root: key files of 1, 64 or 65 keys (aes-cbc-plain64, aes:64-cbc-lmk v2 and v3), --hash, --key-size, --offset, --skip, --keyfile-offset and --keyfile-size, byte-identical to the kernel's mapping. loop-AES has no header, so a wrong key file gives garbage, as with cryptsetup.)P"},
    {"EXAMPLES", R"P(    blkcrypt loopaes decrypt --key-file KEYS disk.img plain.img
    blkcrypt loopaes table --show-key --key-file KEYS disk.img
    blkcrypt loopaes serve --socket /tmp/s --key-file KEYS disk.img)P"},
    {"NOTES", R"P(The examples do what these do: cryptsetup loopaesOpen --key-file KEYS disk.img x and dd, as root; dmsetup table --showkeys x; loopaesOpen, over NBD.)P"},
};

constexpr ManSection kFvault2[] = {
    {"DESCRIPTION", R"P(blkcrypt fvault2 reads FileVault 2 (Core Storage) volumes as cryptsetup's FVAULT2 does, without root: dump prints what "cryptsetup fvault2Dump" prints (--dump-volume-key too), decrypt IMAGE OUT writes what the kernel maps with "cryptsetup open --type fvault2" (the logical volume, aes-xts-plain64), and serve exports it read-only over NBD.)P"},
    {"EXAMPLES", R"P(    blkcrypt fvault2Dump mac.img
    blkcrypt fvault2 decrypt mac.img plain.img
    blkcrypt fvault2 serve --socket /tmp/s mac.img)P"},
    {"NOTES", R"P(The examples do what these do: cryptsetup fvault2Dump mac.img; cryptsetup open --type fvault2 and dd, as root; cryptsetup open --type fvault2 --readonly, over NBD.)P"},
};

constexpr ManSection kIntegrity[] = {
    {"DESCRIPTION", R"P(blkcrypt integrity makes and opens dm-integrity devices as integritysetup and the kernel do, without root or device-mapper. format IMAGE writes what integritysetup format and the kernel write (the superblock, versions 1 to 5 with fix_padding and fix_hmac and a random salt, and a clean journal), then, instead of integritysetup's pass that writes zeros through the whole device, computes the tag of a zero block for every sector and writes the tag areas only: the data stays a hole, so a 16 GiB image formats in about a second and stays sparse. Without -q it asks integritysetup's question on a terminal. --no-wipe leaves the tags invalid, as integritysetup does. dump IMAGE prints the superblock exactly as "integritysetup dump" prints it. read IMAGE OUT writes what integritysetup open exposes, every block checked against its tag; a mismatch fails naming the sector as the kernel's log does, and -R reads without checks. write IN IMAGE writes IN through the target from its first sector, with computed tags. verify IMAGE names every block whose tag does not match. serve IMAGE (open IMAGE NAME, NAME being the export) serves the checked device over NBD. With --data-device DATA, IMAGE is the metadata device (superblock, journal, tags). format writes a journal MAC (--journal-integrity with its key options), and read, write, verify and serve need the same options for such an image; journal encryption is refused (docs/integrity.md).)P"},
    {"EXAMPLES", R"P(    blkcrypt integrity format -q disk.img
    blkcrypt integrity dump disk.img
    blkcrypt integrity write fs.img disk.img
    blkcrypt integrity read disk.img out.img
    blkcrypt integrity verify disk.img
    blkcrypt integrity open --socket /tmp/i.sock disk.img x)P"},
    {"NOTES", R"P(The examples do what these do, as root: integritysetup format -q disk.img (then its wipe pass); integritysetup dump disk.img; integritysetup open disk.img x and dd if=fs.img of=/dev/mapper/x; dd if=/dev/mapper/x of=out.img; reading all of /dev/mapper/x and looking for "Checksum failed" in the kernel log; integritysetup open disk.img x.)P"},
};

constexpr ManSection kReencrypt[] = {
    {"DESCRIPTION", R"P(cryptsetup 2.6.1's reencrypt action on an image file, offline, without root or device-mapper, with its options and its on-disk metadata. A LUKS2 image gets a new volume key (and -c, -s, --sector-size if given), step by step under the --resilience protection (checksum, journal or none); --init-only writes the reencryption metadata only, --resume-only goes on with one already started by blkcrypt or cryptsetup. A LUKS1 image is re-keyed with cryptsetup's legacy protocol (LUKS-<uuid>.log, .org and .new in the working directory), and a LUKS1 image cryptsetup left marked LUKS\xde\xad is finished. For LUKS1, --keep-key rewrites only the header and keyslot (a new --hash, --iter-time or --pbkdf-force-iterations; the volume key, cipher and data stay), --reduce-device-size N moves the data offset N bytes on (the data moves with it, its last N bytes are lost) and --device-size N re-keys only the first N bytes of the data (the rest is lost), as cryptsetup's legacy tool does, also with a detached --header; the new header's hash is --hash or sha256, as cryptsetup's.

--encrypt turns a plain image into LUKS2 in place, as cryptsetup does: with --reduce-device-size N the plaintext is the first size - N bytes, the header takes the first N/2 bytes and the data moves N/2 on, backward under the datashift resilience (--offset at most N/2); with a detached --header FILE (created if missing) nothing moves and the data is encrypted forward under --resilience. --decrypt with a detached --header decrypts the data in place from its end and leaves FILE with a linear segment and no keyslots. Either tool resumes and repairs what the other left, with one exception: cryptsetup 2.6.1 restarts a reencryption whose every hotzone is done but whose finish is not written (one live segment left; its own run and its repair of a crash in the last hotzone leave that) and converts every sector a second time, destroying the data, so finish such a header with blkcrypt reencrypt --resume-only. blkcrypt never writes that map, and its repair of a crash in the last hotzone finishes the run. blkcrypt never leaves that state: its repair of a crash in the last hotzone finishes the decryption. Not yet: --decrypt of a LUKS2 header inside the image (cryptsetup's --header NEW), LUKS2 --device-size.

--encrypt --type luks1 --reduce-device-size N and --decrypt of a LUKS1 image are cryptsetup's legacy modes, which it runs only as root with device-mapper; blkcrypt runs them in userspace with the same LUKS-<uuid>.log/.org/.new files (an encryption's are named LUKS-cafecafe-cafe-cafe-cafe-cafecafeeeee.*): the encryption moves the plaintext's first size - N bytes N on, encrypted, and puts the new header in front; the decryption leaves the plaintext at offset 0 and zeroes the freed tail. An interrupted encryption is resumed by running the same command again in the same directory, a decryption by --decrypt (with --uuid UUID once its first block has overwritten the header).

A second reencrypt or repair of the same image fails at once, before anything is written (an flock on IMAGE, taken whatever --disable-locks says). SIGINT, SIGTERM and SIGHUP stop the run between steps, resumable. A crash (SIGKILL, power loss) leaves a hotzone that "blkcrypt repair" or "cryptsetup repair" recovers. Options that mean nothing offline (--force-offline-reencrypt, --use-fsync, --write-log, ...) are accepted and change nothing; --active-name is refused. Containers with an integrity profile (luksFormat --integrity), which cryptsetup refuses, are re-keyed: every block's data and tag are rewritten under the new key through the dm-integrity device, whose superblock and journal stay as they are; a new cipher or key size only where the tag size stays the same, never a new sector size. Their resilience is journal by default (the hotzone's data and tags copied to the area; checksum is refused, as it cannot restore a block whose data landed without its tag), and only blkcrypt repairs and resumes them.)P"},
    {"EXAMPLES", R"P(    blkcrypt reencrypt --key-file pass disk.img
    blkcrypt reencrypt --resilience journal -c aes-xts-plain64 -s 256 disk.img
    blkcrypt reencrypt --init-only disk.img; cryptsetup reencrypt --resume-only --disable-locks --force-offline-reencrypt disk.img
    blkcrypt reencrypt --encrypt --reduce-device-size 32M disk.img
    blkcrypt reencrypt --encrypt --header disk.hdr disk.img
    blkcrypt reencrypt --decrypt --header disk.hdr disk.img
    blkcrypt reencrypt --keep-key --hash sha512 luks1.img
    blkcrypt reencrypt --encrypt --type luks1 --reduce-device-size 4M disk.img)P"},
    {"NOTES", R"P(The first example is "cryptsetup reencrypt --disable-locks --force-offline-reencrypt disk.img" as a plain user. docs/luks.md lists where blkcrypt differs: one passphrase is carried over (--key-slot with several keyslots). --device-size N rewrites only the first N bytes and then declares the whole data under the new key, as cryptsetup does: what lies beyond N is lost. LUKS1 --keep-key refuses a new cipher and --reduce-device-size, which cryptsetup 2.6.1 accepts and then reads the data wrongly or not at all.)P"},
};

constexpr ManSection kRepair[] = {
    {"DESCRIPTION", R"P(cryptsetup repair for an interrupted reencryption: a LUKS2 hotzone left in-reencryption by a crash of blkcrypt or cryptsetup is recovered from its checksums or its journal (the passphrase is asked for), after which "reencrypt --resume-only" of either tool goes on. A LUKS1 image that cryptsetup's legacy reencryption left marked LUKS\xde\xad (with LUKS-<uuid>.log, .org and .new in the working directory) is rolled back to its old header when no data was converted yet, and finished otherwise. Anything else is left as it is.)P"},
    {"EXAMPLES", R"P(    blkcrypt repair --key-file pass disk.img && blkcrypt reencrypt --resume-only --key-file pass disk.img)P"},
};

constexpr PageProse kPages[] = {
    {"", kMain},          {"list", kList},         {"selftest", kSelftest},
    {"hash", kHash},      {"skcipher", kSkcipher}, {"aead", kAead},
    {"crypt", kCrypt},    {"verity", kVerity},     {"fsverity", kFsverity},
    {"fsverity-sign", kFsveritySign},              {"fsverity-verify-sig", kFsverityVerifySig},
    {"serve", kServe},    {"bench", kBench},       {"luks", kLuks},
    {"tcrypt", kTcrypt},  {"bitlk", kBitlk},       {"loopaes", kLoopaes},
    {"fvault2", kFvault2},  {"open", kOpen},         {"dump", kDump},
    {"test-passphrase", kTestPassphrase},          {"decrypt", kDecrypt},
    {"table", kTable}, {"integrity", kIntegrity},
    {"reencrypt", kReencrypt}, {"repair", kRepair},
};

}  // namespace

std::span<const ManSection> man_prose(std::string_view page) {
    for (const auto& p : kPages)
        if (p.page == page) return p.sections;
    return {};
}

}  // namespace cli
