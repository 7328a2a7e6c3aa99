"""
Certificates for the TLS tests, made with the openssl command: a test CA
and leaf certificates signed by it (ECDSA P-256 or RSA 2048), one with
dates in the past, and keys that match nothing.
"""

import atexit
import os
import shutil
import subprocess
import tempfile
import unittest

CA_CNF = """[ca]
default_ca = test
[test]
dir = %(dir)s
database = %(dir)s/index.txt
new_certs_dir = %(dir)s
serial = %(dir)s/serial
default_md = sha256
policy = anything
copy_extensions = copy
unique_subject = no
[anything]
commonName = supplied
"""


def openssl(*args, cwd):
    subprocess.run(['openssl'] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def new_key(path, kind, cwd):
    if kind == 'rsa':
        openssl('genpkey', '-algorithm', 'RSA', '-pkeyopt',
                'rsa_keygen_bits:2048', '-out', path, cwd=cwd)
    else:
        openssl('genpkey', '-algorithm', 'EC', '-pkeyopt',
                'ec_paramgen_curve:P-256', '-out', path, cwd=cwd)


class PKI:
    """A CA in folder d; leaf() signs certificates for names."""

    def __init__(self, d, parent=None, name='corral test CA'):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.ca_key = os.path.join(d, 'ca.key')
        self.ca = os.path.join(d, 'ca.crt')
        new_key(self.ca_key, 'ec', d)
        if parent is None:
            openssl('req', '-x509', '-new', '-key', self.ca_key, '-out',
                    self.ca, '-days', '30', '-subj', '/CN=' + name, cwd=d)
        else:
            # An intermediate CA, signed by parent's.
            csr = os.path.join(d, 'ca.csr')
            openssl('req', '-new', '-key', self.ca_key, '-out', csr,
                    '-subj', '/CN=' + name, '-addext',
                    'basicConstraints=critical,CA:TRUE', '-addext',
                    'keyUsage=critical,keyCertSign,cRLSign', cwd=d)
            openssl('ca', '-batch', '-config', 'ca.cnf', '-cert', parent.ca,
                    '-keyfile', parent.ca_key, '-in', csr, '-out', self.ca,
                    '-notext', '-days', '20', cwd=parent.dir)
        with open(os.path.join(d, 'ca.cnf'), 'w') as f:
            f.write(CA_CNF % {'dir': d})
        open(os.path.join(d, 'index.txt'), 'w').close()
        with open(os.path.join(d, 'serial'), 'w') as f:
            f.write('1000\n')

    def leaf(self, name, names=(), kind='ec', start=None, end=None,
             key=None, ips=()):
        """
        (cert, key) paths for name (and names, and IP addresses ips);
        dates as YYMMDDhhmmssZ.
        """
        base = os.path.join(self.dir, '%s-%s-%s' % (name, kind,
                                                     start or 'now'))
        key = key or base + '.key'
        if not os.path.exists(key):
            new_key(key, kind, self.dir)
        csr, crt = base + '.csr', base + '.crt'
        san = ','.join(['DNS:' + n for n in (name,) + tuple(names)] +
                       ['IP:' + a for a in ips])
        openssl('req', '-new', '-key', key, '-out', csr, '-subj',
                '/CN=' + name, '-addext', 'subjectAltName=' + san,
                cwd=self.dir)
        args = ['ca', '-batch', '-config', 'ca.cnf', '-cert', self.ca,
                '-keyfile', self.ca_key, '-in', csr, '-out', crt, '-notext']
        if start:
            args += ['-startdate', start, '-enddate', end]
        else:
            args += ['-days', '10']
        openssl(*args, cwd=self.dir)
        return crt, key

    def intermediate(self, name):
        """A CA signed by this one, in a folder of its own."""
        return PKI(os.path.join(self.dir, name.replace(' ', '-')), self,
                   name)

    def serial(self, crt):
        out = subprocess.run(['openssl', 'x509', '-noout', '-serial', '-in',
                              crt], capture_output=True, text=True,
                             check=True)
        return out.stdout.strip().split('=')[1]


_shared = []


def shared():
    """
    One CA for the tests of a module that only need some certificate
    (made at the first call, removed at exit unless CORRAL_KEEP is set).
    """
    if not _shared:
        if not shutil.which('openssl'):
            raise unittest.SkipTest('openssl is not installed')
        d = tempfile.mkdtemp(prefix='corral-pki-')
        os.chmod(d, 0o755)
        if not os.environ.get('CORRAL_KEEP'):
            atexit.register(shutil.rmtree, d, True)
        _shared.append(PKI(d))
    return _shared[0]
