#!/bin/sh
# A UPnP ContentDirectory Browse, as a control point sends it.
#
#   browse.sh HOST:PORT OBJECTID [BrowseDirectChildren|BrowseMetadata]
#
# Prints gerbera's SOAP answer (a DIDL-Lite document, XML-escaped).
hp=${1:?usage: browse.sh HOST:PORT OBJECTID [FLAG]} id=${2:?object id} flag=${3:-BrowseDirectChildren}
curl -s -m 10 -X POST "http://$hp/upnp/control/cds" \
	-H 'Content-Type: text/xml; charset="utf-8"' \
	-H 'SOAPACTION: "urn:schemas-upnp-org:service:ContentDirectory:1#Browse"' \
	--data-binary "<?xml version=\"1.0\"?><s:Envelope xmlns:s=\"http://schemas.xmlsoap.org/soap/envelope/\" s:encodingStyle=\"http://schemas.xmlsoap.org/soap/encoding/\"><s:Body><u:Browse xmlns:u=\"urn:schemas-upnp-org:service:ContentDirectory:1\"><ObjectID>$id</ObjectID><BrowseFlag>$flag</BrowseFlag><Filter>*</Filter><StartingIndex>0</StartingIndex><RequestedCount>0</RequestedCount><SortCriteria></SortCriteria></u:Browse></s:Body></s:Envelope>"
