#!/usr/bin/env bash
# Healthy once the Connect REST API answers GET /connectors with 200, i.e. the worker has joined its
# group and read its config topic. Plain bash (/dev/tcp): the apache/kafka image has no curl.
exec 3<>"/dev/tcp/127.0.0.1/${1:-8083}" || exit 1
printf 'GET /connectors HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
read -r status_line <&3
[[ $status_line == *" 200 "* ]]
