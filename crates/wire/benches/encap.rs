//! Encapsulate and decapsulate, per protocol, for a 64-byte and a 1500-byte
//! tenant frame, with and without the outer checksum.
//!
//! Each iteration works on one preallocated buffer: encap pushes the outer
//! headers and pulls them off again (pull only moves an offset), decap pops
//! them and pushes the offset back (the header bytes are still in place), so
//! what is timed is the header work, never an allocation or a payload copy.
//! `encap/NAME` computes the flow hash for the outer source port itself;
//! `encap/NAME+hash-given` is push alone, with the hash the datapath has
//! already computed for classification (as OVS's push uses the RSS hash).
//!
//! `reference/etherparse-outer` times etherparse, a well-kept parser, on
//! the same Geneve+OVN packets (its zero-copy slicing of the outer
//! Ethernet, IPv4 and UDP headers only): measured in the same run, it turns
//! the absolute figures, which swing with the load of this shared machine,
//! into a ratio that does not.
//!
//! `checksum/lanes` is the Internet checksum over a 1448-byte segment and a
//! 64 KB super-frame; `checksum/rfc1071-16bit` is the textbook one 16-bit
//! word at a time, side by side as the reference.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::net::Ipv4Addr;
use tunlab_wire::ethernet::EtherType;
use tunlab_wire::geneve::{OptType, OptionRepr, OvnPorts, OVN_CLASS, OVN_TYPE};
use tunlab_wire::tunnel::{
    self, Decap, EncapSpec, HeaderTemplate, PopConfig, PushMeta, TunnelKind, MAX_OVERHEAD,
};
use tunlab_wire::vlan::{self, Tci};
use tunlab_wire::PacketBuf;

fn frame(len: usize) -> Vec<u8> {
    // Ethernet + IPv4 + UDP headers so the flow hash has real work to do.
    let mut f = vec![0u8; len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12] = 0x08;
    f[14] = 0x45;
    f[23] = 17;
    f[26..34].copy_from_slice(&[192, 168, 1, 1, 192, 168, 1, 2]);
    f[34..38].copy_from_slice(&[0x13, 0x88, 0x17, 0x70]);
    f
}

fn variants() -> Vec<(&'static str, EncapSpec)> {
    let (s, d) = (
        Ipv4Addr::new(10, 0, 0, 1).into(),
        Ipv4Addr::new(10, 0, 0, 2).into(),
    );
    let mut ovn = EncapSpec::new(TunnelKind::Geneve, s, d, Some(6));
    ovn.geneve_options
        .push(OptionRepr {
            class: OVN_CLASS,
            opt_type: OptType(OVN_TYPE),
            data: &OvnPorts::new(3, 2).unwrap().data(),
        })
        .unwrap();
    vec![
        ("geneve", EncapSpec::new(TunnelKind::Geneve, s, d, Some(6))),
        ("geneve-ovn", ovn),
        ("vxlan", EncapSpec::new(TunnelKind::Vxlan, s, d, Some(6))),
        ("gre", EncapSpec::new(TunnelKind::Gre, s, d, Some(6))),
        ("nvgre", EncapSpec::new(TunnelKind::Nvgre, s, d, Some(6))),
        ("stt", EncapSpec::new(TunnelKind::Stt, s, d, Some(6))),
    ]
}

/// Which outer-checksum settings each protocol has when sending: NVGRE has
/// none (RFC 7637); STT's mandatory checksum is either computed or left
/// partial for the kernel/NIC to complete ("nocsum").
fn encap_csum_cases(name: &str) -> &'static [bool] {
    match name {
        "nvgre" => &[false],
        _ => &[false, true],
    }
}

/// When receiving, the checksum is verified or not; NVGRE has none.
fn decap_csum_cases(name: &str) -> &'static [bool] {
    match name {
        "nvgre" => &[false],
        _ => &[false, true],
    }
}

fn label(name: &str, size: usize, csum: bool) -> BenchmarkId {
    BenchmarkId::from_parameter(format!(
        "{name}/{size}B/{}",
        if csum { "csum" } else { "nocsum" }
    ))
}

/// RFC 1071's loop, one 16-bit word at a time: the reference the
/// checksum bench is read against.
fn checksum_16bit(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    for w in data.chunks(2) {
        acc += if w.len() == 2 {
            u16::from_be_bytes([w[0], w[1]]) as u64
        } else {
            (w[0] as u64) << 8
        };
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

fn bench_checksum(c: &mut Criterion) {
    let mut g = c.benchmark_group("checksum");
    for size in [1448usize, 65160] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(
            tunlab_wire::checksum::checksum(&data),
            checksum_16bit(&data)
        );
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(BenchmarkId::new("lanes", size), |b| {
            b.iter(|| tunlab_wire::checksum::checksum(black_box(&data)))
        });
        g.bench_function(BenchmarkId::new("rfc1071-16bit", size), |b| {
            b.iter(|| checksum_16bit(black_box(&data)))
        });
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    bench_checksum(c);
    let mut enc = c.benchmark_group("encap");
    enc.throughput(Throughput::Elements(1));
    for size in [64usize, 1500] {
        let inner = frame(size);
        for (name, spec) in variants() {
            for &csum in encap_csum_cases(name) {
                let spec = EncapSpec {
                    csum,
                    ..spec.clone()
                };
                let t = HeaderTemplate::build(&spec).unwrap();
                let mut p = PacketBuf::new(vec![0u8; MAX_OVERHEAD + size], MAX_OVERHEAD);
                p.extend(&inner).unwrap();
                enc.bench_function(label(name, size, csum), |b| {
                    b.iter(|| {
                        tunnel::push(&t, &mut p, PushMeta::default()).unwrap();
                        p.pull(t.overhead()).unwrap();
                        black_box(&p);
                    })
                });
                // The datapath hashes each packet once (for the cache and
                // thread steering) and hands the hash to push, as OVS's
                // push uses the packet's RSS hash: push alone.
                let meta = PushMeta {
                    hash: Some(tunlab_wire::flowhash::hash_frame(&inner)),
                    ..PushMeta::default()
                };
                enc.bench_function(label(&format!("{name}+hash-given"), size, csum), |b| {
                    b.iter(|| {
                        tunnel::push(&t, &mut p, meta).unwrap();
                        p.pull(t.overhead()).unwrap();
                        black_box(&p);
                    })
                });
            }
        }
        // QinQ: push S-tag over C-tag, then pop both (two encaps, two decaps).
        let mut p = PacketBuf::new(vec![0u8; 64 + size], 64);
        p.extend(&inner).unwrap();
        enc.bench_function(label("qinq-push+pop", size, false), |b| {
            b.iter(|| {
                vlan::push(&mut p, EtherType::Vlan, Tci::from_u16(100)).unwrap();
                vlan::push(&mut p, EtherType::QinQ, Tci::from_u16(5)).unwrap();
                vlan::pop(&mut p).unwrap();
                vlan::pop(&mut p).unwrap();
                black_box(&p);
            })
        });
    }
    enc.finish();

    let mut dec = c.benchmark_group("decap");
    dec.throughput(Throughput::Elements(1));
    for size in [64usize, 1500] {
        let inner = frame(size);
        for (name, spec) in variants() {
            for &csum in decap_csum_cases(name) {
                // Packets to verify carry a checksum; the others carry none
                // (STT's always arrives complete).
                let spec = EncapSpec {
                    csum: csum || name == "stt",
                    ..spec.clone()
                };
                let t = HeaderTemplate::build(&spec).unwrap();
                let mut p = PacketBuf::new(vec![0u8; MAX_OVERHEAD + size], MAX_OVERHEAD);
                p.extend(&inner).unwrap();
                tunnel::push(&t, &mut p, PushMeta::default()).unwrap();
                let cfg = PopConfig {
                    verify_csum: csum,
                    gre_as_nvgre: name == "nvgre",
                    ..PopConfig::default()
                };
                let n = t.overhead();
                let mut meta = tunnel::TunnelMetadata::default();
                dec.bench_function(label(name, size, csum), |b| {
                    b.iter(|| {
                        let d = tunnel::pop(&mut p, &cfg, tunnel::ovn_only, &mut meta).unwrap();
                        black_box((d == Decap::Frame, meta.tun_id));
                        p.push(n).unwrap();
                    })
                });
            }
        }
    }
    dec.finish();

    let mut reference = c.benchmark_group("reference");
    reference.throughput(Throughput::Elements(1));
    for size in [64usize, 1500] {
        let (_, spec) = variants()
            .into_iter()
            .find(|(n, _)| *n == "geneve-ovn")
            .unwrap();
        let t = HeaderTemplate::build(&EncapSpec {
            csum: false,
            ..spec
        })
        .unwrap();
        let mut p = PacketBuf::new(vec![0u8; MAX_OVERHEAD + size], MAX_OVERHEAD);
        p.extend(&frame(size)).unwrap();
        tunnel::push(&t, &mut p, PushMeta::default()).unwrap();
        let bytes = p.data().to_vec();
        reference.bench_function(label("etherparse-outer", size, false), |b| {
            b.iter(|| {
                let s = etherparse::SlicedPacket::from_ethernet(black_box(&bytes)).unwrap();
                black_box(s.transport.is_some())
            })
        });
    }
    reference.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(50);
    targets = bench
}
criterion_main!(benches);
