#!/usr/bin/env python3
"""Turns the oracle's transcripts (oracle-*.txt, from make-golden.sh) into
the files tests/cli/tcrypt.sh replays: golden.tsv (name, image, password,
options, size and sha256 of the device tcryptOpen mapped), NAME.dump
(tcryptDump --dump-volume-key) and NAME.plain (tcryptDump). For the
volumes tests/tcrypt/make_volume.py generated (generated.tsv,
make-generated.sh), generated.golden: name, size and sha256 of the mapped
device, after checking that it is the sha256 the generator printed."""
import glob, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
cases = {}
for line in open(os.path.join(here, 'cases.tsv')):
    if line.startswith('#') or not line.strip():
        continue
    name, img, pw, opts = line.rstrip('\n').split('\t')
    cases[name] = (img, pw, opts)

found = {}
for path in sorted(glob.glob(os.path.join(here, 'oracle-*.txt'))):
    name = section = None
    buf = []
    for line in open(path, encoding='utf-8', errors='replace'):
        line = line.rstrip('\n')
        m = re.match(r'^=== (\S+)(?: generator-sha256=(\w+))?', line)
        if m:
            name, section = m.group(1), None
            if m.group(2):
                found.setdefault(name, {})['generator'] = m.group(2)
            continue
        m = re.match(r'^--- (\w+)$', line)
        if m:
            section, buf = m.group(1), []
            continue
        if name is None or section is None:
            continue
        if section in ('plain', 'dump'):
            if re.match(r'^rc=\d+$', line):
                if line == 'rc=0':
                    with open(os.path.join(here, f'{name}.{ "plain" if section == "plain" else "dump"}'), 'w') as f:
                        f.write('\n'.join(buf) + '\n')
                section = None
            else:
                buf.append(line)
        elif section == 'open':
            if line.startswith('size='):
                found.setdefault(name, {})['size'] = line[5:]
            elif line.startswith('sha256='):
                found.setdefault(name, {})['sha256'] = line[7:]

with open(os.path.join(here, 'golden.tsv'), 'w') as f:
    f.write('# name\timage\tpassword\toptions\tsize\tsha256 (of the device cryptsetup tcryptOpen mapped)\n')
    for name, (img, pw, opts) in cases.items():
        r = found.get(name, {})
        if 'size' in r and 'sha256' in r:
            f.write('\t'.join([name, img, pw, opts, r['size'], r['sha256']]) + '\n')
        else:
            print(f'{name}: no mapping recorded', file=sys.stderr)

generated = os.path.join(here, 'generated.tsv')
if os.path.exists(generated):
    with open(os.path.join(here, 'generated.golden'), 'w') as f:
        f.write('# name\tsize\tsha256 (of the device cryptsetup tcryptOpen mapped from the generated volume)\n')
        for line in open(generated):
            if line.startswith('#') or not line.strip():
                continue
            name = line.split('\t')[0]
            r = found.get(name, {})
            if 'sha256' not in r:
                sys.exit(f'{name}: no mapping recorded')
            if r['sha256'] != r.get('generator'):
                sys.exit(f'{name}: the kernel mapped {r["sha256"]}, the generator wrote {r.get("generator")}')
            f.write('\t'.join([name, r['size'], r['sha256']]) + '\n')

# The TrueCrypt legacy CBC volumes (legacy.tsv, LIST=legacy make-generated.sh):
# legacy.golden holds, per volume, the size and sha256 the kernel mapped
# (checked against the generator's), or "-" where cryptsetup refuses to map
# the chain (the outer-CBC and Blowfish ones: its transcript must say so).
legacy = os.path.join(here, 'legacy.tsv')
transcript = os.path.join(here, 'oracle-legacy.txt')
if os.path.exists(legacy) and os.path.exists(transcript):
    text = open(transcript, encoding='utf-8', errors='replace').read()
    with open(os.path.join(here, 'legacy.golden'), 'w') as f:
        f.write('# name\tsize\tsha256 (of the device cryptsetup tcryptOpen mapped; "-": it cannot map the chain)\n')
        for line in open(legacy):
            if line.startswith('#') or not line.strip():
                continue
            name = line.split('\t')[0]
            r = found.get(name, {})
            if not os.path.exists(os.path.join(here, f'{name}.dump')):
                sys.exit(f'{name}: tcryptDump did not read the header')
            if 'sha256' in r:
                if r['sha256'] != r.get('generator'):
                    sys.exit(f'{name}: the kernel mapped {r["sha256"]}, the generator wrote {r.get("generator")}')
                f.write('\t'.join([name, r['size'], r['sha256']]) + '\n')
            else:
                block = text.split(f'=== {name} ', 1)[1].split('\n=== ', 1)[0]
                if 'Kernel does not support activation for this TCRYPT legacy mode.' not in block:
                    sys.exit(f'{name}: not mapped, and not for the legacy mode')
                f.write('\t'.join([name, '-', '-']) + '\n')
# System encryption of a partition (make-system.sh, system.tsv): what the
# kernel mapped for the whole disks and their partitions; the partitions'
# plaintext must be what the generator encrypted.
system = os.path.join(here, 'system.tsv')
if os.path.exists(system):
    names = []
    for line in open(system):
        if line.startswith('#') or not line.strip():
            continue
        names += [line.split('\t')[0] + '-disk', line.split('\t')[0] + '-part']
    names.append('sys-fixture-part1')
    with open(os.path.join(here, 'system.golden'), 'w') as f:
        f.write('# name\tsize\tsha256 (of the device cryptsetup tcryptOpen --tcrypt-system mapped: the whole disk or its partition)\n')
        for name in names:
            r = found.get(name, {})
            if 'sha256' not in r:
                sys.exit(f'{name}: no mapping recorded')
            if name.endswith('-part') and r['sha256'] != r.get('generator'):
                sys.exit(f'{name}: the kernel mapped {r["sha256"]}, the generator wrote {r.get("generator")}')
            f.write('\t'.join([name, r['size'], r['sha256']]) + '\n')
