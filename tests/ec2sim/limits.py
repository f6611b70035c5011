# SPDX-License-Identifier: Apache-2.0
"""EBS volume-type limits and instance attachment limits, as the EC2 documentation gives them.

Volume types: size range (GiB), IOPS range and the highest IOPS per GiB where IOPS can be
provisioned, throughput range (MiB/s) and the highest MiB/s per provisioned IOPS for gp3.
As of 2026: gp3 up to 64 TiB, 80,000 IOPS and 2,000 MiB/s (since September 2025); io2 is io2
Block Express (up to 64 TiB, 256,000 IOPS, 1,000 IOPS per GiB, 4,000 MiB/s, not provisioned).
volplug's own table (src/backend/params.c) is checked against this one by test-params."""

from wire import Ec2Error, combination, invalid, missing

VOLUME_TYPES = {
    "gp2": {"size": (1, 16384)},
    "gp3": {"size": (1, 65536), "iops": (3000, 80000), "iops_per_gib": 500,
            "throughput": (125, 2000), "mibps_per_iops": 0.25},
    "io1": {"size": (4, 16384), "iops": (100, 64000), "iops_per_gib": 50},
    "io2": {"size": (4, 65536), "iops": (100, 256000), "iops_per_gib": 1000},
    "st1": {"size": (125, 16384)},
    "sc1": {"size": (125, 16384)},
    "standard": {"size": (1, 1024)},
}


def gp2_iops(size):
    """gp2 has no provisioned IOPS: 3 per GiB, at least 100, at most 16,000."""
    return min(16000, max(100, 3 * size))


def check_volume(vtype, size, iops, throughput, what="volume"):
    """The (iops, throughput) a volume of this type and size gets, defaults filled in.
    iops/throughput None means not given. Raises Ec2Error naming the parameter at fault."""
    if vtype not in VOLUME_TYPES:
        raise invalid("VolumeType", "Value (%s) for parameter volumeType is invalid. "
                      "Valid types: %s" % (vtype, ", ".join(sorted(VOLUME_TYPES))))
    limits = VOLUME_TYPES[vtype]
    lo, hi = limits["size"]
    if size < lo:
        raise invalid("Size", "The %s size %d GiB is too small for volume type %s; minimum is "
                      "%d GiB" % (what, size, vtype, lo))
    if size > hi:
        raise invalid("Size", "The %s size %d GiB is too large for volume type %s; maximum is "
                      "%d GiB" % (what, size, vtype, hi))
    if "iops" not in limits:
        if iops is not None:
            raise combination("The parameter Iops is not supported for %s volumes" % vtype)
        if throughput is not None:
            raise combination("The parameter Throughput is not supported for %s volumes" % vtype)
        return (gp2_iops(size) if vtype == "gp2" else None), None
    ilo, ihi = limits["iops"]
    if iops is None:
        if vtype != "gp3":
            raise missing("Iops")
        iops = ilo
    if not ilo <= iops <= ihi:
        raise invalid("Iops", "Iops %d is out of range for volume type %s: %d to %d"
                      % (iops, vtype, ilo, ihi))
    # gp3 always allows its baseline, whatever the size.
    if iops > ilo and iops > size * limits["iops_per_gib"]:
        raise invalid("Iops", "Iops to volume size ratio of %.1f is too high for volume type "
                      "%s; maximum is %d IOPS per GiB" % (iops / size, vtype,
                                                          limits["iops_per_gib"]))
    if "throughput" not in limits:
        if throughput is not None:
            raise combination("The parameter Throughput is not supported for %s volumes" % vtype)
        return iops, None
    tlo, thi = limits["throughput"]
    if throughput is None:
        throughput = tlo
    if not tlo <= throughput <= thi:
        raise invalid("Throughput", "Throughput %d MiB/s is out of range for volume type %s: "
                      "%d to %d" % (throughput, vtype, tlo, thi))
    if throughput > tlo and throughput > iops * limits["mibps_per_iops"]:
        raise invalid("Throughput", "Throughput to Iops ratio of %.3f is too high for volume "
                      "type %s; maximum is %.2f MiB/s per IOPS"
                      % (throughput / iops, vtype, limits["mibps_per_iops"]))
    return iops, throughput


# Instance families by hypervisor. On Nitro, EBS volumes, network interfaces and NVMe instance
# store volumes share 28 attachment slots (instance store is not modelled here). On Xen the
# documented limit is 40 EBS volumes (more is "best effort"): the simulator holds it hard.
NITRO_FAMILIES = frozenset("""
a1 c5 c5a c5ad c5d c5n c6a c6g c6gd c6gn c6i c6id c6in c7a c7g c7gd c7gn c7i d3 d3en g4ad g4dn g5
g5g i3en i4g i4i im4gn inf1 is4gen m5 m5a m5ad m5d m5dn m5n m5zn m6a m6g m6gd m6i m6id m6idn
m6in m7a m7g m7gd m7i m7i-flex r5 r5a r5ad r5b r5d r5dn r5n r6a r6g r6gd r6i r6id r6idn r6in r7a
r7g r7gd r7i t3 t3a t4g x2gd x2idn x2iedn z1d
""".split())
XEN_FAMILIES = frozenset("c3 c4 d2 g3 i2 i3 m3 m4 p2 p3 r3 r4 t2 x1 x1e".split())


def hypervisor(instance_type):
    """'nitro' or 'xen' for a known instance type such as m5.large; None when unknown."""
    family = instance_type.split(".", 1)[0]
    if family in NITRO_FAMILIES:
        return "nitro"
    if family in XEN_FAMILIES:
        return "xen"
    return None


def max_ebs_volumes(instance_type, enis, config):
    """How many EBS volumes (the root volume included) the instance can have attached."""
    if hypervisor(instance_type) == "nitro":
        return config["nitro_attachment_slots"] - enis
    return config["xen_attachment_limit"]


def check_instance_type(instance_type):
    if hypervisor(instance_type) is None or "." not in instance_type:
        raise Ec2Error("InvalidParameterValue", "unknown instance type %r (known families: %s)"
                       % (instance_type, " ".join(sorted(NITRO_FAMILIES | XEN_FAMILIES))))
